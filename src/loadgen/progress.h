// ProgressBar: a one-line live status on stderr while a phase runs
// ("[#####.....] 12/60 requests, 0 errors, 4.2 req/s, 3.1 s"), redrawn
// 10 times a second with "\r" by its own thread and erased at the end.
// Disabled (does nothing) unless `enabled`; the CLI enables it only when
// stderr is a terminal and --no-progress is not given.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace nexus::loadgen {

class ProgressBar {
 public:
  // total_requests and/or duration_s set the bar's scale (the larger fraction wins).
  ProgressBar(bool enabled, std::string label, std::optional<uint64_t> total_requests,
              std::optional<double> duration_s);
  ~ProgressBar();  // stops and erases the line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void add(bool ok);  // one finished request

  // The status line for the given state (for tests; no escape codes).
  static std::string line(const std::string& label, uint64_t done, uint64_t errors,
                          std::optional<uint64_t> total, std::optional<double> duration_s, double elapsed_s);

 private:
  void loop();

  bool enabled_;
  std::string label_;
  std::optional<uint64_t> total_;
  std::optional<double> duration_s_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> done_{0}, errors_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace nexus::loadgen
