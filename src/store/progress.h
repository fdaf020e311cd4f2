// Download progress on stderr: on a terminal one line redrawn in place
// ("  45.2/120.0 MiB  37% [=======>     ]  12.3 MiB/s  ETA 6s"), at most ten
// times a second; otherwise (a log, a pipe) a plain line every 5 seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace nexus::store {

class Progress {
 public:
  // total: expected bytes (0 = unknown); start: bytes already there (a resume),
  // which do not count towards the rate.
  Progress(std::string label, uint64_t total, uint64_t start, FILE* out = stderr);
  void update(uint64_t done);  // bytes in the file now
  void finish();               // the last line (newline on a terminal)

  // "12.3 MiB/s", "ETA 6s" etc., for the line; public for tests.
  static std::string line(uint64_t done, uint64_t total, double bytes_per_s, bool bar);

 private:
  using Clock = std::chrono::steady_clock;
  void print(uint64_t done);

  std::string label_;
  uint64_t total_, start_, done_;
  FILE* out_;
  bool tty_;
  Clock::time_point t0_, last_;
};

}  // namespace nexus::store
