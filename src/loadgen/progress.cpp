#include "loadgen/progress.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace nexus::loadgen {

ProgressBar::ProgressBar(bool enabled, std::string label, std::optional<uint64_t> total_requests,
                         std::optional<double> duration_s)
    : enabled_(enabled), label_(std::move(label)), total_(total_requests), duration_s_(duration_s),
      start_(std::chrono::steady_clock::now()) {
  if (enabled_) thread_ = std::thread([this] { loop(); });
}

ProgressBar::~ProgressBar() {
  if (!enabled_) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::fputs("\r\x1b[K", stderr);  // erase the line: the report follows on stdout
  std::fflush(stderr);
}

void ProgressBar::add(bool ok) {
  done_++;
  if (!ok) errors_++;
}

std::string ProgressBar::line(const std::string& label, uint64_t done, uint64_t errors,
                              std::optional<uint64_t> total, std::optional<double> duration_s, double elapsed_s) {
  double frac = 0;
  if (total && *total > 0) frac = static_cast<double>(done) / static_cast<double>(*total);
  if (duration_s && *duration_s > 0) frac = std::max(frac, elapsed_s / *duration_s);
  frac = std::clamp(frac, 0.0, 1.0);
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(frac * kWidth);
  const std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(kWidth - filled), '.');
  const std::string count = total ? fmt::format("{}/{}", done, *total) : fmt::format("{}", done);
  return fmt::format("{} [{}] {} requests, {} errors, {:.1f} req/s, {:.1f} s", label, bar, count, errors,
                     elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0, elapsed_s);
}

void ProgressBar::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string s = line(label_, done_.load(), errors_.load(), total_, duration_s_, elapsed);
    std::fprintf(stderr, "\r%s\x1b[K", s.c_str());
    std::fflush(stderr);
    cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; });
  }
}

}  // namespace nexus::loadgen
