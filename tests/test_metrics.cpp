// The metrics library (src/metrics) and EngineMetrics: exact text exposition
// format, histogram cumulativity, escaping, validation, concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_metrics.h"
#include "metrics/metrics.h"
#include "util/error.h"

using namespace nexus;
using namespace nexus::metrics;

namespace {

// name{labels} -> value, from a rendered exposition (comments skipped).
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    const std::string v = line.substr(sp + 1);
    out[line.substr(0, sp)] = v == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(v);
  }
  return out;
}

}  // namespace

TEST(Metrics, RendersTheTextFormatExactly) {
  Registry reg;
  IntCounter& ok = reg.int_counter("app_requests_total", "Requests.", {{"code", "200"}});
  IntCounter& bad = reg.int_counter("app_requests_total", "Requests.", {{"code", "500"}});
  Counter& secs = reg.counter("app_busy_seconds_total", "Busy time\nin seconds \\ wall.");
  Gauge& g = reg.gauge("app_queue", "Queue length.");
  Histogram& h = reg.histogram("app_latency_seconds", "Latency.", {0.125, 0.5, 2}, {{"path", "/a"}});
  ok.inc(3);
  bad.inc();
  secs.inc(1.25);
  g.set(-2);
  h.observe(0.125);  // on a bound: counted in that bucket (le is inclusive)
  h.observe(0.25);
  h.observe(0.375);
  h.observe(7);      // +Inf only
  EXPECT_EQ(reg.render(),
            "# HELP app_requests_total Requests.\n"
            "# TYPE app_requests_total counter\n"
            "app_requests_total{code=\"200\"} 3\n"
            "app_requests_total{code=\"500\"} 1\n"
            "# HELP app_busy_seconds_total Busy time\\nin seconds \\\\ wall.\n"
            "# TYPE app_busy_seconds_total counter\n"
            "app_busy_seconds_total 1.25\n"
            "# HELP app_queue Queue length.\n"
            "# TYPE app_queue gauge\n"
            "app_queue -2\n"
            "# HELP app_latency_seconds Latency.\n"
            "# TYPE app_latency_seconds histogram\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"0.125\"} 1\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"0.5\"} 3\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"2\"} 3\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"+Inf\"} 4\n"
            "app_latency_seconds_sum{path=\"/a\"} 7.75\n"
            "app_latency_seconds_count{path=\"/a\"} 4\n");
}

TEST(Metrics, HistogramSumAndCountCarryTheSeriesLabels) {
  Registry reg;
  Histogram& h = reg.histogram("x_seconds", "X.", {1}, {{"k", "v"}});
  h.observe(0.5);
  const auto s = samples(reg.render());
  EXPECT_EQ(s.at("x_seconds_sum{k=\"v\"}"), 0.5);
  EXPECT_EQ(s.at("x_seconds_count{k=\"v\"}"), 1);
  EXPECT_EQ(s.at("x_seconds_bucket{k=\"v\",le=\"+Inf\"}"), 1);
}

TEST(Metrics, BucketsAreCumulativeAndCountIsTheInfBucket) {
  Registry reg;
  Histogram& h = reg.histogram("lat_seconds", "Latency.", latency_buckets_seconds());
  const std::vector<double> values = {0.00005, 0.0001, 0.00015, 0.003, 0.003, 0.04, 0.9, 1, 9.9, 10, 11, 1e9};
  for (double v : values) h.observe(v);
  const auto s = samples(reg.render());
  double prev = 0;
  int n_buckets = 0;
  for (double le : latency_buckets_seconds()) {
    const double c = s.at("lat_seconds_bucket{le=\"" + format_value(le) + "\"}");
    EXPECT_GE(c, prev) << "le=" << le;
    // Exactly the observations <= le.
    double expected = 0;
    for (double v : values) expected += v <= le ? 1 : 0;
    EXPECT_EQ(c, expected) << "le=" << le;
    prev = c;
    ++n_buckets;
  }
  EXPECT_EQ(n_buckets, 16);
  EXPECT_EQ(s.at("lat_seconds_bucket{le=\"+Inf\"}"), static_cast<double>(values.size()));
  EXPECT_EQ(s.at("lat_seconds_count"), static_cast<double>(values.size()));
  EXPECT_EQ(h.count(), values.size());
}

TEST(Metrics, LatencyBucketsResolveATenthOfAMillisecondToTenSeconds) {
  const std::vector<double> b = latency_buckets_seconds();
  EXPECT_EQ(b.front(), 0.0001);
  EXPECT_EQ(b.back(), 10);
  for (size_t i = 1; i < b.size(); ++i) {
    const double ratio = b[i] / b[i - 1];
    EXPECT_TRUE(std::fabs(ratio - 2) < 1e-9 || std::fabs(ratio - 2.5) < 1e-9) << b[i - 1] << " -> " << b[i];
  }
  EXPECT_EQ(format_value(b[0]), "0.0001");
  EXPECT_EQ(format_value(b[1]), "0.0002");
  EXPECT_EQ(exponential_buckets(1, 2, 11), (std::vector<double>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}));
}

TEST(Metrics, FormatsSpecialValues) {
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(std::stod(format_value(1e300)), 1e300);
  EXPECT_EQ(std::stod(format_value(1.0 / 3)), 1.0 / 3);
}

TEST(Metrics, EscapesLabelValues) {
  Registry reg;
  reg.gauge("g", "G.", {{"v", "a\"b\\c\nd"}}).set(1);
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_NE(reg.render().find("g{v=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << reg.render();
}

TEST(Metrics, CountersOnlyGoUp) {
  IntCounter c;
  c.inc(5);
  c.inc(-3);  // ignored
  EXPECT_EQ(c.value(), 5);
  c.advance_to(9);
  c.advance_to(7);  // lower: ignored
  EXPECT_EQ(c.value(), 9);
  Histogram h({1});
  h.observe(std::nan(""));
  EXPECT_EQ(h.count(), 0u);
}

TEST(Metrics, RejectsInvalidRegistrations) {
  Registry reg;
  EXPECT_THROW(reg.gauge("1abc", "bad name"), Error);
  EXPECT_THROW(reg.gauge("a-b", "bad name"), Error);
  EXPECT_THROW(reg.gauge("ok", "bad label", {{"__x", "v"}}), Error);
  EXPECT_THROW(reg.gauge("ok2", "bad label", {{"a:b", "v"}}), Error);
  EXPECT_THROW(reg.gauge("ok3", "twice", {{"a", "1"}, {"a", "2"}}), Error);
  EXPECT_THROW(reg.histogram("h", "le is reserved", {1}, {{"le", "1"}}), Error);
  EXPECT_THROW(reg.histogram("h", "unsorted", {2, 1}), Error);
  EXPECT_THROW(reg.histogram("h", "nan", {std::nan("")}), Error);
  reg.gauge("dup", "D.", {{"a", "1"}});
  EXPECT_THROW(reg.gauge("dup", "D.", {{"a", "1"}}), Error);
  EXPECT_THROW(reg.int_counter("dup", "D.", {{"a", "2"}}), Error);  // other type
  reg.histogram("hh", "H.", {1, 2});
  EXPECT_THROW(reg.histogram("hh", "H.", {1, 3}, {{"a", "1"}}), Error);  // other buckets
  // Failed registrations left nothing behind.
  EXPECT_EQ(reg.render().find("# HELP h "), std::string::npos);
  EXPECT_EQ(reg.render().find("ok"), std::string::npos);
}

// Two updater threads while a third renders: no crash (and no TSan/ASan
// report), every rendering parses, and the final counts add up exactly.
TEST(Metrics, ConcurrentObserveWhileRendering) {
  Registry reg;
  Histogram& h = reg.histogram("h_seconds", "H.", latency_buckets_seconds());
  IntCounter& c = reg.int_counter("c_total", "C.");
  Counter& d = reg.counter("d_total", "D.");
  constexpr int kPerThread = 20000;
  std::atomic<bool> go{false};
  auto work = [&](double v) {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < kPerThread; ++i) {
      h.observe(v);
      c.inc();
      d.inc(0.5);
    }
  };
  std::thread t1(work, 0.0003), t2(work, 3.0);
  go = true;
  int renders = 0;
  double last_count = 0;
  while (renders < 50 || last_count < 2 * kPerThread) {
    const auto s = samples(reg.render());
    const double count = s.at("h_seconds_count");
    EXPECT_EQ(count, s.at("h_seconds_bucket{le=\"+Inf\"}"));
    EXPECT_GE(count, last_count);  // never goes back
    EXPECT_LE(s.at("h_seconds_bucket{le=\"0.0002\"}"), s.at("h_seconds_bucket{le=\"0.0005\"}"));
    last_count = count;
    ++renders;
    if (renders > 100000) break;  // both threads finished long ago: fail below
  }
  t1.join();
  t2.join();
  const auto s = samples(reg.render());
  EXPECT_EQ(s.at("h_seconds_count"), 2.0 * kPerThread);
  EXPECT_EQ(s.at("h_seconds_bucket{le=\"0.0005\"}"), 1.0 * kPerThread);
  EXPECT_EQ(s.at("h_seconds_bucket{le=\"2\"}"), 1.0 * kPerThread);
  EXPECT_EQ(s.at("h_seconds_bucket{le=\"5\"}"), 2.0 * kPerThread);
  EXPECT_NEAR(s.at("h_seconds_sum"), kPerThread * (0.0003 + 3.0), 1e-6);
  EXPECT_EQ(s.at("c_total"), 2.0 * kPerThread);
  EXPECT_EQ(s.at("d_total"), 1.0 * kPerThread);
}

// Gauges set together with set_gauges() are rendered together: parts of a
// total, rewritten by one thread in a tight loop, always add up in every
// rendering made meanwhile (a torn read of set() calls one by one fails
// this within a few hundred renders).
TEST(Metrics, GaugesSetTogetherAreRenderedTogether) {
  Registry reg;
  Gauge& total = reg.gauge("blocks_total", "T.");
  Gauge& used = reg.gauge("blocks", "B.", {{"state", "used"}});
  Gauge& free = reg.gauge("blocks", "B.", {{"state", "free"}});
  std::atomic<bool> stop{false};
  std::atomic<int64_t> updates{0};
  std::thread writer([&] {
    for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      const double u = static_cast<double>(i % 97), f = static_cast<double>((i * 7) % 89);
      reg.set_gauges({{&total, u + f}, {&used, u}, {&free, f}});
      updates.store(i + 1, std::memory_order_relaxed);
    }
  });
  int renders = 0;
  while (renders < 2000 || updates.load() < 1000) {
    const auto s = samples(reg.render());
    ASSERT_EQ(s.at("blocks{state=\"used\"}") + s.at("blocks{state=\"free\"}"), s.at("blocks_total"))
        << "render " << renders << " saw a half-written update";
    if (++renders > 200000) break;
  }
  stop = true;
  writer.join();
  EXPECT_GT(updates.load(), 0);
}

TEST(EngineMetrics, ObservesRequestsStepsAndGauges) {
  EngineMetrics m;
  RequestRecord r;
  r.queue_s = 0.001;
  r.ttft_s = 0.02;
  r.e2e_s = 0.5;
  r.prompt_tokens = 10;
  r.cached_prompt_tokens = 4;
  r.completion_tokens = 7;
  r.finish = FinishReason::Length;
  m.observe_request(r);
  r.ttft_s = -1;  // no token generated: not a TTFT observation
  r.completion_tokens = 0;
  r.finish = FinishReason::Cancelled;
  m.observe_request(r);
  m.observe_itl(0.004);
  m.observe_step(0.003, 300, 3);
  m.add_preemption();
  m.set_gauges({.running_sequences = 2, .waiting_requests = 5, .kv_blocks_total = 100, .kv_blocks_used = 60,
                .kv_blocks_free = 30, .kv_blocks_cached = 10, .prefix_cache_queried_tokens = 80,
                .prefix_cache_hit_tokens = 32});
  m.set_gauges({.prefix_cache_queried_tokens = 70});  // a lower cumulative count never lowers the counter
  const auto s = samples(m.render());
  EXPECT_EQ(s.at("nexus_request_queue_seconds_count"), 2);
  EXPECT_EQ(s.at("nexus_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(s.at("nexus_time_to_first_token_seconds_bucket{le=\"0.01\"}"), 0);
  EXPECT_EQ(s.at("nexus_time_to_first_token_seconds_bucket{le=\"0.02\"}"), 1);
  EXPECT_EQ(s.at("nexus_e2e_request_latency_seconds_count"), 2);
  EXPECT_EQ(s.at("nexus_inter_token_latency_seconds_count"), 1);
  EXPECT_EQ(s.at("nexus_requests_total{finish_reason=\"length\"}"), 1);
  EXPECT_EQ(s.at("nexus_requests_total{finish_reason=\"cancelled\"}"), 1);
  EXPECT_EQ(s.at("nexus_requests_total{finish_reason=\"stop\"}"), 0);
  EXPECT_EQ(s.at("nexus_requests_total{finish_reason=\"error\"}"), 0);
  EXPECT_EQ(s.at("nexus_prompt_tokens_total"), 20);
  EXPECT_EQ(s.at("nexus_cached_prompt_tokens_total"), 8);
  EXPECT_EQ(s.at("nexus_generation_tokens_total"), 7);
  EXPECT_EQ(s.at("nexus_step_seconds_count"), 1);
  EXPECT_EQ(s.at("nexus_batch_tokens_bucket{le=\"256\"}"), 0);
  EXPECT_EQ(s.at("nexus_batch_tokens_bucket{le=\"512\"}"), 1);
  EXPECT_EQ(s.at("nexus_batch_sequences_bucket{le=\"2\"}"), 0);
  EXPECT_EQ(s.at("nexus_batch_sequences_bucket{le=\"4\"}"), 1);
  EXPECT_EQ(s.at("nexus_preemptions_total"), 1);
  EXPECT_EQ(s.at("nexus_running_sequences"), 0);  // the second set_gauges
  EXPECT_EQ(s.at("nexus_kv_blocks_total"), 0);
  EXPECT_EQ(s.at("nexus_prefix_cache_queried_tokens_total"), 80);
  EXPECT_EQ(s.at("nexus_prefix_cache_hit_tokens_total"), 32);
  m.set_gauges({.running_sequences = 2, .waiting_requests = 5, .kv_blocks_total = 100, .kv_blocks_used = 60,
                .kv_blocks_free = 30, .kv_blocks_cached = 10});
  const auto s2 = samples(m.render());
  EXPECT_EQ(s2.at("nexus_running_sequences"), 2);
  EXPECT_EQ(s2.at("nexus_waiting_requests"), 5);
  EXPECT_EQ(s2.at("nexus_kv_blocks_total"), 100);
  EXPECT_EQ(s2.at("nexus_kv_blocks{state=\"used\"}"), 60);
  EXPECT_EQ(s2.at("nexus_kv_blocks{state=\"free\"}"), 30);
  EXPECT_EQ(s2.at("nexus_kv_blocks{state=\"cached\"}"), 10);
}

TEST(EngineMetrics, RequestRecordFromAFinalEvent) {
  GenerationEvent ev;
  ev.done = true;
  ev.finish = FinishReason::Stop;
  ev.usage = {12, 3};
  ev.timings.queue_s = 0.1;
  ev.timings.ttft_s = 0.2;
  RequestRecord r = request_record(ev, 0.9, 5);
  EXPECT_EQ(r.queue_s, 0.1);
  EXPECT_EQ(r.ttft_s, 0.2);
  EXPECT_EQ(r.e2e_s, 0.9);
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_EQ(r.cached_prompt_tokens, 5);
  EXPECT_EQ(r.completion_tokens, 3);
  EXPECT_EQ(r.finish, FinishReason::Stop);
  ev.usage.completion_tokens = 0;
  EXPECT_LT(request_record(ev, 0.9, 0).ttft_s, 0);
}
