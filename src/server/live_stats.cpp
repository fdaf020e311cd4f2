#include "server/live_stats.h"

#include <algorithm>

namespace nexus::server {

using nlohmann::json;

std::optional<double> bucket_quantile(const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                                      double q) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0 || counts.size() != bounds.size() + 1) return std::nullopt;
  const double rank = q * static_cast<double>(total);
  double below = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double in = static_cast<double>(counts[i]);
    if (in > 0 && below + in >= rank) {
      if (i == bounds.size()) return bounds.empty() ? 0.0 : bounds.back();  // +Inf bucket
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      return lo + (bounds[i] - lo) * std::clamp((rank - below) / in, 0.0, 1.0);
    }
    below += in;
  }
  return bounds.empty() ? 0.0 : bounds.back();
}

namespace {

// Per-bucket differences newer - older (counters never go down; a shorter or
// missing older reading counts as zero).
std::vector<uint64_t> bucket_delta(const BucketCounts& newer, const BucketCounts& older) {
  std::vector<uint64_t> d = newer.counts;
  if (older.counts.size() != d.size()) return d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = d[i] > older.counts[i] ? d[i] - older.counts[i] : 0;
  return d;
}

uint64_t total(const std::vector<uint64_t>& v) {
  uint64_t t = 0;
  for (uint64_t x : v) t += x;
  return t;
}

json quantiles_ms(const BucketCounts& newer, const BucketCounts& older) {
  const std::vector<uint64_t> d = bucket_delta(newer, older);
  json j = {{"count", total(d)}};
  for (const auto& [name, q] : {std::pair{"p50", 0.5}, std::pair{"p90", 0.9}, std::pair{"p99", 0.99}}) {
    const std::optional<double> v = bucket_quantile(newer.bounds, d, q);
    j[name] = v ? json(*v * 1000.0) : json(nullptr);
  }
  return j;
}

double seconds(LiveStatsWindow::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void LiveStatsWindow::add(Clock::time_point at, LiveCounters c) {
  samples_.push_back(Sample{at, std::move(c)});
  // Keep the newest sample at or before the window's start: the window then
  // spans the whole minute once the server has run that long.
  while (samples_.size() > 2 && samples_[1].at <= at - window_) samples_.pop_front();
}

json LiveStatsWindow::snapshot(int64_t unix_ms) const {
  static const LiveCounters kNone;
  const Sample* newest = samples_.empty() ? nullptr : &samples_.back();
  const Sample* oldest = samples_.size() >= 2 ? &samples_.front() : nullptr;
  const Sample* previous = samples_.size() >= 2 ? &samples_[samples_.size() - 2] : nullptr;
  const LiveCounters& now = newest ? newest->c : kNone;
  const LiveCounters& first = oldest ? oldest->c : kNone;
  const LiveCounters& prev = previous ? previous->c : now;

  const double interval = previous ? seconds(newest->at - previous->at) : 0.0;
  const uint64_t steps = now.steps > prev.steps ? now.steps - prev.steps : 0;
  const uint64_t tokens = total(bucket_delta(now.itl_s, prev.itl_s)) + total(bucket_delta(now.ttft_s, prev.ttft_s));
  const auto per_s = [&](double n) { return interval > 0 ? n / interval : 0.0; };
  const auto per_step = [&](double sum_now, double sum_prev) {
    return steps > 0 ? std::max(0.0, sum_now - sum_prev) / static_cast<double>(steps) : 0.0;
  };
  return json{
      {"t", unix_ms},
      {"window_s", oldest ? seconds(newest->at - oldest->at) : 0.0},
      {"interval_s", interval},
      {"ttft_ms", quantiles_ms(now.ttft_s, first.ttft_s)},
      {"itl_ms", quantiles_ms(now.itl_s, first.itl_s)},
      {"tokens_per_s", per_s(static_cast<double>(tokens))},
      {"steps_per_s", per_s(static_cast<double>(steps))},
      {"step_ms", per_step(now.step_seconds, prev.step_seconds) * 1000.0},
      {"batch_size", per_step(now.batch_sequences, prev.batch_sequences)},
      {"batch_tokens", per_step(now.batch_tokens, prev.batch_tokens)},
      {"running", now.running},
      {"waiting", now.waiting},
      {"kv_used_blocks", now.kv_used_blocks},
      {"kv_cached_blocks", now.kv_cached_blocks},
      {"kv_total_blocks", now.kv_total_blocks},
  };
}

}  // namespace nexus::server
