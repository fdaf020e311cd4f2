// LiveStatsWindow and bucket_quantile (server/live_stats.h): the live
// dashboard's percentiles and rates from cumulative counters, on samples
// with made-up timestamps (no clock involved).
#include <gtest/gtest.h>

#include <chrono>

#include "server/live_stats.h"

using namespace nexus::server;
using namespace std::chrono_literals;

namespace {

const std::vector<double> kBounds = {0.001, 0.002, 0.005, 0.01};  // seconds; 5 counts with +Inf

BucketCounts buckets(std::vector<uint64_t> counts) { return BucketCounts{kBounds, std::move(counts)}; }

}  // namespace

TEST(BucketQuantile, InterpolatesInsideTheBucketHoldingTheRank) {
  const std::vector<double> b = {1, 2, 5};
  EXPECT_DOUBLE_EQ(*bucket_quantile(b, {0, 10, 0, 0}, 0.5), 1.5);   // half-way through (1, 2]
  EXPECT_DOUBLE_EQ(*bucket_quantile(b, {2, 2, 0, 0}, 0.5), 1.0);    // rank 2 ends the first bucket
  EXPECT_DOUBLE_EQ(*bucket_quantile(b, {4, 0, 0, 0}, 0.25), 0.25);  // the first bucket starts at 0
  EXPECT_DOUBLE_EQ(*bucket_quantile(b, {0, 0, 4, 0}, 0.75), 4.25);  // (2, 5], 3/4 of the way
  EXPECT_DOUBLE_EQ(*bucket_quantile(b, {0, 0, 0, 5}, 0.99), 5.0);   // +Inf: the last finite bound
  EXPECT_DOUBLE_EQ(*bucket_quantile(b, {98, 0, 0, 2}, 0.99), 5.0);
  EXPECT_DOUBLE_EQ(*bucket_quantile(b, {98, 0, 0, 2}, 0.5), 50.0 / 98);
  EXPECT_FALSE(bucket_quantile(b, {0, 0, 0, 0}, 0.5).has_value());
  EXPECT_FALSE(bucket_quantile(b, {1, 2}, 0.5).has_value());  // counts do not match the bounds
}

TEST(LiveStatsWindow, EmptyWindowHasZeroRatesAndNullPercentiles) {
  const LiveStatsWindow w;
  const auto s = w.snapshot(1234);
  EXPECT_EQ(s["t"], 1234);
  EXPECT_EQ(s["tokens_per_s"], 0.0);
  EXPECT_EQ(s["step_ms"], 0.0);
  EXPECT_TRUE(s["ttft_ms"]["p50"].is_null());
  EXPECT_EQ(s["itl_ms"]["count"], 0);
  EXPECT_EQ(s["running"], 0);
}

TEST(LiveStatsWindow, RatesComeFromTheLastIntervalAndGaugesFromTheNewestSample) {
  LiveStatsWindow w;
  const auto t0 = LiveStatsWindow::Clock::time_point{} + 1000s;
  LiveCounters a;
  a.ttft_s = buckets({0, 0, 0, 0, 0});
  a.itl_s = buckets({0, 0, 0, 0, 0});
  a.steps = 100;
  a.step_seconds = 1.0;
  a.batch_sequences = 100;
  a.batch_tokens = 400;
  w.add(t0, a);
  LiveCounters b = a;
  b.ttft_s = buckets({0, 2, 0, 0, 0});   // 2 requests ended, TTFT in (1, 2] ms
  b.itl_s = buckets({40, 0, 0, 0, 0});   // 40 more tokens, ITL <= 1 ms
  b.steps = 150;                          // 50 steps in 2 s ...
  b.step_seconds = 1.1;                   // ... of 2 ms each
  b.batch_sequences = 100 + 50 * 3;       // 3 sequences a step
  b.batch_tokens = 400 + 50 * 4;
  b.running = 3;
  b.waiting = 2;
  b.kv_used_blocks = 7;
  b.kv_total_blocks = 64;
  w.add(t0 + 2s, b);
  const auto s = w.snapshot(0);
  EXPECT_DOUBLE_EQ(s["interval_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["tokens_per_s"].get<double>(), 21.0);  // (40 + 2 first tokens) / 2 s
  EXPECT_DOUBLE_EQ(s["steps_per_s"].get<double>(), 25.0);
  EXPECT_NEAR(s["step_ms"].get<double>(), 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(s["batch_size"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(s["batch_tokens"].get<double>(), 4.0);
  EXPECT_EQ(s["running"], 3);
  EXPECT_EQ(s["waiting"], 2);
  EXPECT_EQ(s["kv_used_blocks"], 7);
  EXPECT_EQ(s["kv_total_blocks"], 64);
  EXPECT_EQ(s["ttft_ms"]["count"], 2);
  EXPECT_NEAR(s["ttft_ms"]["p50"].get<double>(), 1.5, 1e-9);  // milliseconds
  EXPECT_EQ(s["itl_ms"]["count"], 40);
  EXPECT_NEAR(s["itl_ms"]["p90"].get<double>(), 0.9, 1e-9);

  // A third sample with no traffic: rates drop to zero, the minute's
  // percentiles still count both requests.
  w.add(t0 + 3s, b);
  const auto idle = w.snapshot(0);
  EXPECT_EQ(idle["tokens_per_s"], 0.0);
  EXPECT_EQ(idle["steps_per_s"], 0.0);
  EXPECT_EQ(idle["step_ms"], 0.0);
  EXPECT_EQ(idle["batch_size"], 0.0);
  EXPECT_EQ(idle["ttft_ms"]["count"], 2);
  EXPECT_DOUBLE_EQ(idle["window_s"].get<double>(), 3.0);
}

TEST(LiveStatsWindow, PercentilesForgetWhatIsOlderThanTheWindow) {
  LiveStatsWindow w(60s);
  const auto t0 = LiveStatsWindow::Clock::time_point{} + 1000s;
  LiveCounters c;
  c.ttft_s = buckets({0, 0, 0, 0, 0});
  c.itl_s = buckets({0, 0, 0, 0, 0});
  w.add(t0, c);
  c.ttft_s = buckets({0, 0, 0, 0, 100});  // a slow start: 100 requests over 10 ms
  w.add(t0 + 1s, c);
  EXPECT_NEAR(w.snapshot(0)["ttft_ms"]["p50"].get<double>(), 10.0, 1e-9);
  for (int i = 2; i <= 90; ++i) {
    c.ttft_s.counts[0] += 1;  // then one fast request a second
    w.add(t0 + std::chrono::seconds(i), c);
  }
  EXPECT_EQ(w.samples(), 61u);  // one at the window's start and 60 after it
  const auto s = w.snapshot(0);
  EXPECT_DOUBLE_EQ(s["window_s"].get<double>(), 60.0);
  EXPECT_EQ(s["ttft_ms"]["count"], 60);
  EXPECT_LE(s["ttft_ms"]["p99"].get<double>(), 1.0);  // the slow ones left the window
}
