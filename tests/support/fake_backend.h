// FakeBackend: a scripted server::Backend for HTTP tests without a model.
//
// Tokens are bytes + 2 (ids 2..257), BOS = 1 is prepended. A generation
// emits max_tokens pieces "t0 ", "t1 ", ... (or `piece` repeated when set),
// one event per token on the fake's own thread, checking cancellation before
// each step like the real Engine, then a final event (Length, or Cancelled).
// A prompt containing the bytes "FAIL" ends with FinishReason::Error.
// With `script` set, a generation emits its pieces instead (one event each,
// at most max_tokens of them) and ends with Stop when the script ran out.
// hold() makes the worker wait before starting the next generation (to fill
// the queue); release() lets it go.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/backend.h"

namespace nexus::test {

class FakeBackend final : public server::Backend {
 public:
  explicit FakeBackend(int32_t n_ctx = 64, size_t max_queue = 8) : n_ctx_(n_ctx), max_queue_(max_queue) {
    worker_ = std::thread([this] { run(); });
  }
  ~FakeBackend() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      held_ = false;
    }
    cv_.notify_all();
    worker_.join();
  }

  const std::string& model_id() const override { return id_; }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t n_vocab() const override { return 258; }
  const server::ChatTemplate& chat_template() const override { return chat; }
  std::vector<int32_t> tokenize(std::string_view text, bool) const override {
    tokenize_thread.store(std::this_thread::get_id());
    std::vector<int32_t> ids{1};
    for (unsigned char c : text) ids.push_back(c + 2);
    return ids;
  }
  // Without BOS: bytes + 2.
  std::vector<int32_t> tokenize_continuation(std::string_view text, bool) const override {
    tokenize_thread.store(std::this_thread::get_id());
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c + 2);
    return ids;
  }
  void end_session(uint64_t session) override {
    std::lock_guard lock(mu_);
    ended_sessions_.push_back(session);
  }
  std::vector<uint64_t> ended_sessions() const { std::lock_guard lock(mu_); return ended_sessions_; }
  std::shared_ptr<RequestHandle> submit(GenerationRequest req, EventCallback cb) override {
    std::lock_guard lock(mu_);
    if (queue_.size() >= max_queue_) return nullptr;
    auto h = std::make_shared<RequestHandle>();
    queue_.push_back(Job{std::move(req), std::move(cb), h, std::chrono::steady_clock::now()});
    cv_.notify_all();
    return h;
  }

  // What GET /v1/stats/stream samples (zeros unless a test sets them).
  server::LiveCounters live_counters() const override {
    std::lock_guard lock(mu_);
    return live_;
  }
  void set_live_counters(server::LiveCounters c) {
    std::lock_guard lock(mu_);
    live_ = std::move(c);
  }

  // A fixed exposition, for the GET /metrics routing tests.
  std::string metrics_text() const override { return kMetricsText; }
  static constexpr const char* kMetricsText =
      "# HELP fake_requests_total Fake.\n# TYPE fake_requests_total counter\nfake_requests_total 7\n";

  // The thread of the last tokenize call (HTTP tests check which one runs it).
  mutable std::atomic<std::thread::id> tokenize_thread{};

  size_t queued() const { std::lock_guard lock(mu_); return queue_.size(); }
  void hold() { std::lock_guard lock(mu_); held_ = true; }
  void release() {
    { std::lock_guard lock(mu_); held_ = false; }
    cv_.notify_all();
  }
  // Waits (bounded) until `pred` holds; returns whether it did.
  template <class Pred>
  static bool wait_for(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

  server::ChatTemplate chat;  // the plain fallback unless a test sets one
  std::string piece;                         // when set, every token's text
  std::vector<std::string> script;           // when set, the events' texts
  std::chrono::microseconds token_delay{0};  // per generated token
  std::atomic<int> started{0}, completed{0}, cancelled{0};
  std::atomic<int> last_prompt_tokens{0}, last_max_tokens{0};
  GenerationRequest last_request() const { std::lock_guard lock(mu_); return last_; }

 private:
  struct Job {
    GenerationRequest req;
    EventCallback cb;
    std::shared_ptr<RequestHandle> handle;
    std::chrono::steady_clock::time_point submitted;
  };

  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || (!held_ && !queue_.empty()); });
        if (stop_ && queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        last_ = job.req;
      }
      started++;
      generate(job);
    }
  }

  void generate(Job& job) {
    const auto& p = job.req.prompt;
    last_prompt_tokens = static_cast<int>(p.size());
    last_max_tokens = job.req.stop.max_tokens;
    GenerationEvent final;
    final.done = true;
    final.usage.prompt_tokens = static_cast<int32_t>(p.size());
    const std::vector<int32_t> fail{'F' + 2, 'A' + 2, 'I' + 2, 'L' + 2};
    if (std::search(p.begin(), p.end(), fail.begin(), fail.end()) != p.end()) {
      final.finish = FinishReason::Error;
      final.error = "scripted failure";
      job.cb(final);
      completed++;
      return;
    }
    final.finish = FinishReason::Length;
    for (int32_t i = 0; i < job.req.stop.max_tokens; ++i) {
      if (!script.empty() && static_cast<size_t>(i) >= script.size()) {
        final.finish = FinishReason::Stop;
        break;
      }
      if (job.handle->cancelled() || stop_) {
        final.finish = FinishReason::Cancelled;
        break;
      }
      if (token_delay.count() > 0) std::this_thread::sleep_for(token_delay);
      GenerationEvent ev;
      ev.token = 2 + i % 256;
      ev.text = !script.empty() ? script[static_cast<size_t>(i)] : piece.empty() ? "t" + std::to_string(i) + " " : piece;
      final.usage.completion_tokens++;
      job.cb(ev);
    }
    job.cb(final);
    (final.finish == FinishReason::Cancelled ? cancelled : completed)++;
  }

  const std::string id_ = "fake-model";
  const int32_t n_ctx_;
  const size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  GenerationRequest last_;
  std::vector<uint64_t> ended_sessions_;
  server::LiveCounters live_;
  bool held_ = false;
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

}  // namespace nexus::test
