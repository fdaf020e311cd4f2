// LiveStats: the live dashboard's numbers (GET /v1/stats/stream, docs/server.md
// "Live stats"), computed from cumulative counters sampled once a second.
//
// The engine's metrics are cumulative (histogram bucket counts, step and
// token totals since start); a sample is one reading of them plus the
// engine's gauges now. The window keeps the samples of the last minute;
// each snapshot is the difference between the newest sample and
//   - the oldest one kept (at most `window` old): TTFT and ITL percentiles,
//     estimated from the histogram buckets as Prometheus' histogram_quantile
//     does (linear within the bucket that holds the rank; a rank in the +Inf
//     bucket reports the last finite bound);
//   - the one before it (about a second): tokens/s, steps/s, mean step time,
//     mean batch size (sequences and tokens per step).
// Gauges (running, waiting, KV blocks) are the newest sample's.
//
// Pure: no I/O, no clock of its own (the caller stamps samples), not
// thread-safe (StatsHub uses it from one strand).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace nexus::server {

// Per-bucket (not cumulative) counts of one histogram and its bounds
// (metrics::Histogram::bucket_counts: bounds.size() + 1 counts, the last +Inf).
struct BucketCounts {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
};

// One reading of the engine's counters (cumulative since start) and gauges.
struct LiveCounters {
  BucketCounts ttft_s;            // TTFT, seconds (observed when a request ends)
  BucketCounts itl_s;             // ITL, seconds (observed at every token after the first)
  uint64_t steps = 0;             // engine steps run
  double step_seconds = 0;        // their total duration, seconds
  double batch_sequences = 0;     // sum over steps of the sequences batched
  double batch_tokens = 0;        // sum over steps of the tokens evaluated (prefill + decode)
  int32_t running = 0;            // sequences running now
  int32_t waiting = 0;            // requests waiting now
  int32_t kv_used_blocks = 0;
  int32_t kv_cached_blocks = 0;
  int32_t kv_total_blocks = 0;
};

// The q-quantile (0 < q < 1) of the observations counted in `counts`
// (per bucket, bounds as in BucketCounts), in the bounds' unit; nullopt when
// there are none. Linear interpolation inside the bucket, from 0 for the first.
std::optional<double> bucket_quantile(const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                                      double q);

class LiveStatsWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LiveStatsWindow(Clock::duration window = std::chrono::seconds(60)) : window_(window) {}

  // Adds a sample taken at `at` (non-decreasing) and drops those older than
  // the window (keeping one at or before its start, so the window is full).
  void add(Clock::time_point at, LiveCounters c);
  // The snapshot (docs/server.md lists its fields); `unix_ms` is its "t".
  // Before any sample: every rate 0, percentiles null.
  nlohmann::json snapshot(int64_t unix_ms) const;
  size_t samples() const { return samples_.size(); }

 private:
  struct Sample {
    Clock::time_point at;
    LiveCounters c;
  };
  Clock::duration window_;
  std::deque<Sample> samples_;
};

}  // namespace nexus::server
