// Gathers one engine request's events (a GenerationRequest's callback) for
// tests: the events in order, the text and token ids they carried, and the
// final event; wait() blocks until that final event arrives.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace nexus::test {

struct EventCollector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<GenerationEvent> events;
  std::string text;
  std::vector<int32_t> tokens;
  GenerationEvent final_event;
  bool done = false;
  int finals = 0;  // final events seen: exactly 1 for a correct engine

  void on(const GenerationEvent& ev) {
    std::lock_guard lock(mu);
    events.push_back(ev);
    text += ev.text;
    if (ev.token >= 0) tokens.push_back(ev.token);
    if (ev.done) {
      ++finals;
      final_event = ev;
      done = true;
      cv.notify_all();
    }
  }
  // False when no final event came within `seconds`.
  bool wait(int seconds = 120) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return done; });
  }
};

// The callback to submit with; it keeps the collector alive.
inline EventCallback into(const std::shared_ptr<EventCollector>& c) {
  return [c](const GenerationEvent& ev) { c->on(ev); };
}

}  // namespace nexus::test
