// nexus bench statistics: percentiles, summaries, per-request metrics and
// the phase aggregation (src/loadgen/stats.h, metrics.h), on known values.
#include <gtest/gtest.h>

#include "loadgen/metrics.h"
#include "loadgen/stats.h"
#include "loadgen/svg_chart.h"

using namespace nexus::loadgen;

namespace {

// Reference values from numpy.percentile (linear interpolation, the default).
TEST(BenchPercentile, MatchesNumpyLinearInterpolation) {
  const std::vector<double> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 50), 5.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 90), 9.1);
  EXPECT_NEAR(percentile_sorted(v, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 100), 10);
  // np.percentile([15, 20, 35, 40, 50], [40, 75]) = [29, 40]
  const std::vector<double> w{15, 20, 35, 40, 50};
  EXPECT_DOUBLE_EQ(percentile_sorted(w, 40), 29);
  EXPECT_DOUBLE_EQ(percentile_sorted(w, 75), 40);
  EXPECT_DOUBLE_EQ(percentile_sorted({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile_sorted(w, 150), 50);  // clamped
  EXPECT_DOUBLE_EQ(percentile_sorted({}, 50), 0);
}

TEST(BenchPercentile, SummarySortsAndCounts) {
  const Summary s = summarize({10, 1, 4, 3, 2, 9, 5, 8, 7, 6});
  EXPECT_EQ(s.count, 10u);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.p50, 5.5);
  EXPECT_DOUBLE_EQ(s.p90, 9.1);
  EXPECT_NEAR(s.p99, 9.91, 1e-12);
  const Summary e = summarize({});
  EXPECT_EQ(e.count, 0u);
  EXPECT_EQ(e.p99, 0);
}

TEST(BenchCost, PerMillionOutputTokens) {
  // $3.60/hour at 1000 tokens/s: 3.6e6 tokens per hour -> $1 per million.
  EXPECT_DOUBLE_EQ(*cost_per_million_tokens(3.6, 1000), 1.0);
  EXPECT_NEAR(*cost_per_million_tokens(2.0, 50), 2.0 / (50 * 3600.0) * 1e6, 1e-9);
  EXPECT_FALSE(cost_per_million_tokens(2.0, 0).has_value());
}

RequestRecord record(Clock::time_point t0, uint64_t session, int32_t turn, std::vector<int> chunk_ms, int e2e_ms,
                     std::optional<int64_t> completion) {
  RequestRecord r;
  r.session = session;
  r.turn = turn;
  r.max_tokens = 8;
  r.scheduled = t0;
  r.result.start = t0;
  for (int ms : chunk_ms) r.result.token_times.push_back(t0 + std::chrono::milliseconds(ms));
  r.result.end = t0 + std::chrono::milliseconds(e2e_ms);
  r.result.completion_tokens = completion;
  if (completion) r.result.prompt_tokens = 10;
  r.result.http_status = 200;
  return r;
}

TEST(BenchMetrics, RequestTtftItlTpotE2e) {
  const auto t0 = Clock::now();
  const RequestMetrics m = request_metrics(record(t0, 0, 0, {100, 110, 130, 160}, 200, 4), t0);
  ASSERT_TRUE(m.ttft_ms.has_value());
  EXPECT_DOUBLE_EQ(*m.ttft_ms, 100);
  EXPECT_DOUBLE_EQ(m.e2e_ms, 200);
  ASSERT_TRUE(m.tpot_ms.has_value());
  EXPECT_DOUBLE_EQ(*m.tpot_ms, (200.0 - 100.0) / 3);  // (E2E - TTFT) / (completion_tokens - 1)
  EXPECT_EQ(m.chunk_times_ms.size(), 4u);
  // One token: no TPOT.
  EXPECT_FALSE(request_metrics(record(t0, 0, 0, {50}, 60, 1), t0).tpot_ms.has_value());
}

TEST(BenchMetrics, PhaseAggregatesCompletedRequestsAndCountsErrors) {
  PhaseRun run;
  run.start = Clock::now();
  const auto t = run.start;
  run.records.push_back(record(t, 1, 0, {100, 110, 130}, 150, 3));
  run.records.push_back(record(t + std::chrono::milliseconds(500), 0, 0, {20, 40}, 1000, std::nullopt));
  run.records.push_back(record(t, 1, 1, {300, 310}, 320, 2));
  RequestRecord bad = record(t, 2, 0, {}, 5, std::nullopt);
  bad.result.error = ErrorKind::HttpStatus;
  bad.result.http_status = 429;
  bad.result.error_message = "queue full";
  run.records.push_back(bad);
  RequestRecord late = record(t, 3, 0, {}, 5, std::nullopt);
  late.result.error = ErrorKind::Timeout;
  run.records.push_back(late);
  run.end = t + std::chrono::seconds(2);
  run.sessions = 4;
  run.connections_opened = 2;

  const PhaseReport p = analyze_phase(run, "concurrency 2", 2, 0, 3.6);
  EXPECT_EQ(p.requests, 5u);
  EXPECT_EQ(p.completed, 3u);
  EXPECT_EQ(p.failed, 2u);
  EXPECT_EQ(p.errors.at("http_429"), 1u);
  EXPECT_EQ(p.errors.at("timeout"), 1u);
  EXPECT_EQ(p.error_examples.at("http_429"), "queue full");
  // Usage where given (3 + 2), chunk count otherwise (2).
  EXPECT_EQ(p.completion_tokens, 7);
  EXPECT_EQ(p.prompt_tokens, 20);
  EXPECT_EQ(p.usage_missing, 1u);
  EXPECT_EQ(p.text_chunks, 7u);
  EXPECT_DOUBLE_EQ(p.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(p.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(p.output_token_throughput, 3.5);
  EXPECT_DOUBLE_EQ(p.total_token_throughput, 13.5);
  ASSERT_TRUE(p.cost_per_million_output_tokens.has_value());
  EXPECT_NEAR(*p.cost_per_million_output_tokens, 3.6 / (3.5 * 3600) * 1e6, 1e-6);
  EXPECT_EQ(p.ttft_ms.count, 3u);
  EXPECT_DOUBLE_EQ(p.ttft_ms.min, 20);
  EXPECT_DOUBLE_EQ(p.ttft_ms.max, 300);
  // ITL pooled: 10, 20 | 20 | 10
  EXPECT_EQ(p.itl_ms.count, 4u);
  EXPECT_DOUBLE_EQ(p.itl_ms.mean, 15);
  EXPECT_EQ(p.e2e_ms.count, 3u);
  EXPECT_DOUBLE_EQ(p.e2e_ms.max, 1000);
  ASSERT_EQ(p.ttft_by_turn.size(), 2u);
  EXPECT_EQ(p.ttft_by_turn[0].ttft_ms.count, 2u);
  EXPECT_DOUBLE_EQ(p.ttft_by_turn[1].ttft_ms.p50, 300);
  // Details sorted by (session, turn).
  ASSERT_EQ(p.requests_detail.size(), 5u);
  EXPECT_EQ(p.requests_detail[0].session, 0u);
  EXPECT_EQ(p.requests_detail[1].session, 1u);
  EXPECT_EQ(p.requests_detail[2].turn, 1);
  EXPECT_DOUBLE_EQ(p.requests_detail[0].start_s, 0.5);
}

TEST(BenchSvg, NiceTickSteps) {
  EXPECT_DOUBLE_EQ(nice_tick_step(100, 5), 20);
  EXPECT_DOUBLE_EQ(nice_tick_step(9, 6), 2);
  EXPECT_DOUBLE_EQ(nice_tick_step(0.7, 6), 0.2);
  EXPECT_DOUBLE_EQ(nice_tick_step(1000, 10), 100);
}

TEST(BenchSvg, OnePolylinePerPercentileAndPanel) {
  BenchReport r;
  for (int c : {1, 2, 4}) {
    PhaseReport p;
    p.label = "concurrency " + std::to_string(c);
    p.concurrency = c;
    p.ttft_ms = summarize({1.0 * c, 2.0 * c, 3.0 * c});
    p.itl_ms = summarize({0.5, 0.6});
    p.e2e_ms = summarize({10.0 * c, 20.0 * c});
    r.phases.push_back(p);
  }
  r.phases[0].label = "<&>";  // escaped where it appears
  const std::string svg = sweep_svg(r);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t lines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 9u);  // 3 panels x (p50, p90, p99)
  for (const char* t : {"TTFT (ms)", "ITL (ms)", "E2E (ms)", "load: concurrency"}) {
    EXPECT_NE(svg.find(t), std::string::npos) << t;
  }
  EXPECT_EQ(svg.find("<&>"), std::string::npos);
}

}  // namespace
