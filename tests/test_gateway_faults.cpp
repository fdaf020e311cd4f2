// The gateway's execution layer against real faults of real replicas
// (`nexus serve` processes on loopback): a replica killed with SIGKILL
// mid-run, one frozen with SIGSTOP and thawed with SIGCONT, one answering
// 500 to 30% of its requests (--fault), and the gateway's own drain on
// SIGTERM. Every test bounds its load in requests and prints its counts.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/gateway_load.h"
#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

std::string replica_id(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// Polls the gateway's metrics until `pred` holds or `limit` passes.
template <class Pred>
bool wait_for_metrics(uint16_t gw_port, milliseconds limit, Pred pred) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred(scrape_metrics(gw_port))) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

}  // namespace

TEST(GatewayFaults, KillNineOfOneReplicaMidRunLosesNoRequestSilently) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 3);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--ttft-timeout-ms", "5000", "--stream-idle-timeout-ms", "5000"});
  ASSERT_GT(gw.port, 0);

  // At the kill at most kClients / 2 streams are in flight, all of which may sit on the dead replica
  // and must end with an error event; 60 requests a client keep even that worst case (6 of 720)
  // within the issue's 99% success (30 a client failed it under ASan: 6 of 360).
  constexpr int kClients = 12, kPerClient = 60;
  CallCounts streams, plain;
  std::atomic<int> done{0}, streams_started_then_failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(30));
      for (int i = 0; i < kPerClient; ++i) {
        const bool stream = (i + t) % 2 == 0;
        const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 96}, {"ignore_eos", true}, {"stream", stream}};
        CallResult r = call(c, "/v1/completions", body);
        if (r.end == CallEnd::Exception) {  // a broken client connection: count it, continue on a new one
          (stream ? streams : plain).add(r);
          ++done;
          return;
        }
        (stream ? streams : plain).add(r);
        if (r.end == CallEnd::StreamError && r.events > 0) ++streams_started_then_failed;
        ++done;
      }
    });
  }
  // Kill one replica once a third of the requests are done.
  // (Bounded: a client that lost its connection stops early.)
  const auto give_up_at = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done < kClients * kPerClient / 3 && std::chrono::steady_clock::now() < give_up_at)
    std::this_thread::sleep_for(milliseconds(5));
  ASSERT_EQ(rs.servers[0]->proc.stop(SIGKILL), 128 + SIGKILL);
  for (auto& th : clients) th.join();
  plain.print("kill -9: non-streamed");
  streams.print("kill -9: streamed");
  const auto m = scrape_metrics(gw.port);
  const double broken = metric_or(m, "nexus_gateway_streams_broken_total", {{"replica", replica_id(rs.ports[0])}});
  std::printf("[kill -9] streams broken on the dead replica %.0f (clients saw %d), retries connect %.0f reset %.0f\n",
              broken, streams_started_then_failed.load(),
              metric_or(m, "nexus_gateway_retries_total", {{"reason", "connect"}}),
              metric_or(m, "nexus_gateway_retries_total", {{"reason", "reset"}}));
  const int total = plain.total() + streams.total();
  EXPECT_EQ(total, kClients * kPerClient);
  EXPECT_EQ(plain.ok, plain.total());  // every non-streamed request completed (retried)
  EXPECT_EQ(streams.cut, 0);           // no stream silently cut
  EXPECT_EQ(plain.exception + streams.exception, 0);  // none hung or lost its connection
  EXPECT_EQ(streams.http_error, 0);    // unstarted streams were retried
  // A stream that failed had started (on the dead replica) and was counted.
  EXPECT_EQ(streams.stream_error, streams_started_then_failed);
  EXPECT_EQ(broken, streams.stream_error);
  EXPECT_GE(plain.ok + streams.ok, 0.99 * total);
}

TEST(GatewayFaults, StoppedReplicaOpensItsBreakerAndRejoinsThroughHalfOpen) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 3);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--ttft-timeout-ms", "1000", "--probe-timeout-ms", "200", "--breaker-cooldown-ms",
                               "500", "--breaker-failures", "3"});
  ASSERT_GT(gw.port, 0);
  const std::string frozen = replica_id(rs.ports[0]);

  std::atomic<bool> stop{false};
  CallCounts counts;
  // Each request's start and latency (8 tokens, non-streamed: the latency is
  // mostly the time to the first token), for the p99 before the stop and
  // once the breaker opened; printed, not asserted (wall-clock times on a
  // shared machine, under ASan too).
  using SteadyClock = std::chrono::steady_clock;
  std::mutex latency_mu;
  std::vector<std::pair<SteadyClock::time_point, double>> latencies;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(30));
      // Until the test stops them (a fixed count ran out before the rejoin on
      // a fast machine); the cap only bounds a test whose waits all fail.
      for (int i = 0; i < 100000 && !stop; ++i) {
        const auto t0 = SteadyClock::now();
        counts.add(call(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}}));
        const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
        std::lock_guard lock(latency_mu);
        latencies.emplace_back(t0, ms);
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  const auto stopped_at = SteadyClock::now();
  ASSERT_EQ(kill(rs.servers[0]->proc.pid(), SIGSTOP), 0);
  const bool opened = wait_for_metrics(gw.port, milliseconds(5000), [&](const auto& m) {
    return metric_or(m, "nexus_gateway_breaker_state", {{"replica", frozen}}) == 1;
  });
  const auto opened_at = SteadyClock::now();
  EXPECT_TRUE(opened) << "the stopped replica's breaker did not open within 5 s";
  // While it is stopped, traffic goes elsewhere: its routing count barely
  // moves (half-open probes may be tried, and time out) while the others'
  // grow.
  auto routed = [&](const std::vector<MetricSample>& m, const std::string& r) {
    return metric_or(m, "nexus_gateway_routing_decisions_total", {{"replica", r}});
  };
  const auto before = scrape_metrics(gw.port);
  std::this_thread::sleep_for(milliseconds(1000));
  const auto after = scrape_metrics(gw.port);
  const double to_frozen = routed(after, frozen) - routed(before, frozen);
  const double to_others = routed(after, replica_id(rs.ports[1])) + routed(after, replica_id(rs.ports[2])) -
                           routed(before, replica_id(rs.ports[1])) - routed(before, replica_id(rs.ports[2]));
  std::printf("[SIGSTOP] routed in 1 s while stopped: frozen %.0f, others %.0f\n", to_frozen, to_others);
  {
    auto p99 = [&](SteadyClock::time_point from, SteadyClock::time_point to) {
      std::vector<double> v;
      std::lock_guard lock(latency_mu);
      for (const auto& [t0, ms] : latencies)
        if (t0 >= from && t0 < to) v.push_back(ms);
      if (v.empty()) return std::pair<double, size_t>{0, 0};
      std::sort(v.begin(), v.end());
      return std::pair<double, size_t>{v[std::min(v.size() - 1, v.size() * 99 / 100)], v.size()};
    };
    const auto [base, n_base] = p99(SteadyClock::time_point{}, stopped_at);
    const auto [after, n_after] = p99(opened_at, opened_at + milliseconds(1000));
    std::printf("[SIGSTOP] latency p99 (8 tokens): %.2f ms healthy (%zu requests), %.2f ms in the 1 s after the "
                "breaker opened, %.0f ms after the stop (%zu requests): %.2fx\n",
                base, n_base, after, std::chrono::duration<double, std::milli>(opened_at - stopped_at).count(),
                n_after, base > 0 ? after / base : 0.0);
  }
  EXPECT_LE(to_frozen, 4);
  EXPECT_GT(to_others, 20);

  ASSERT_EQ(kill(rs.servers[0]->proc.pid(), SIGCONT), 0);
  const bool rejoined = wait_for_metrics(gw.port, milliseconds(5000), [&](const auto& m) {
    return metric_or(m, "nexus_gateway_breaker_state", {{"replica", frozen}}) == 0 &&
           metric_or(m, "nexus_gateway_breaker_transitions_total", {{"replica", frozen}, {"to", "half_open"}}) >= 1 &&
           metric_or(m, "nexus_gateway_breaker_transitions_total", {{"replica", frozen}, {"to", "closed"}}) >= 1;
  });
  EXPECT_TRUE(rejoined) << "the replica did not rejoin through half-open within 5 s";
  const double routed_at_rejoin = routed(scrape_metrics(gw.port), frozen);
  std::this_thread::sleep_for(milliseconds(500));
  const double routed_later = routed(scrape_metrics(gw.port), frozen);
  stop = true;
  for (auto& th : clients) th.join();
  counts.print("SIGSTOP/SIGCONT");
  std::printf("[SIGCONT] routed to the rejoined replica in 0.5 s: %.0f\n", routed_later - routed_at_rejoin);
  EXPECT_GT(routed_later - routed_at_rejoin, 5);
  EXPECT_EQ(counts.ok, counts.total());  // requests on the frozen replica moved after the TTFT limit
}

// Requests a frozen replica had already taken (it accepts the connection
// and the request, then answers nothing) move to another replica once its
// breaker opens, well before the TTFT limit, as long as nothing of their
// answer reached the client.
TEST(GatewayFaults, RequestsWaitingOnAFrozenReplicaMoveWhenItsBreakerOpens) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--policy", "round-robin", "--ttft-timeout-ms", "20000"});
  ASSERT_GT(gw.port, 0);
  ASSERT_EQ(kill(rs.servers[0]->proc.pid(), SIGSTOP), 0);
  // Round-robin: half of these go to the frozen replica before its breaker opens.
  constexpr int kRequests = 4;
  std::vector<int> status(kRequests, 0);
  std::vector<double> seconds(kRequests, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(30));
      const auto t0 = std::chrono::steady_clock::now();
      const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"stream", i % 2 == 1}};
      status[i] = c.post("/v1/completions", body.dump()).status;
      seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  for (auto& t : clients) t.join();
  ASSERT_EQ(kill(rs.servers[0]->proc.pid(), SIGCONT), 0);
  for (int i = 0; i < kRequests; ++i) {
    std::printf("[frozen] request %d (%s): HTTP %d in %.2f s\n", i, i % 2 ? "streamed" : "whole", status[i], seconds[i]);
    EXPECT_EQ(status[i], 200) << i;
    EXPECT_LT(seconds[i], 10.0) << i << ": waited for the TTFT limit (20 s) instead of moving";
  }
  const auto m = scrape_metrics(gw.port);
  EXPECT_GE(metric_or(m, "nexus_gateway_retries_total", {{"reason", "breaker_open"}}), 1);
  EXPECT_EQ(metric_or(m, "nexus_gateway_retries_total", {{"reason", "timeout"}}), 0);
}

TEST(GatewayFaults, AReplicaFailingThirtyPercentIsRetriedAround) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 3);
  ASSERT_TRUE(rs.all_started());
  // The breaker would soon take the failing replica out of rotation; kept
  // closed here, so that every one of its failures goes through a retry.
  GatewayProcess gw(rs.ports, {"--fault", "abort=30:500@" + replica_url(rs.ports[0]), "--breaker-failures", "100000"});
  ASSERT_GT(gw.port, 0);
  constexpr int kClients = 8, kPerClient = 50;
  CallCounts counts;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(30));
      for (int i = 0; i < kPerClient; ++i)
        counts.add(call(c, "/v1/completions",
                        {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"stream", (i + t) % 3 == 0}}));
    });
  }
  for (auto& th : clients) th.join();
  counts.print("abort=30:500 on one replica");
  const auto m = scrape_metrics(gw.port);
  const double injected = metric_or(m, "nexus_gateway_faults_injected_total", {{"kind", "abort"}});
  const double retried = metric_or(m, "nexus_gateway_retries_total", {{"reason", "status_5xx"}});
  std::printf("[abort=30:500] injected %.0f, retried %.0f, budget exhausted %.0f\n", injected, retried,
              metric_or(m, "nexus_gateway_retry_budget_exhausted_total", {}));
  EXPECT_GT(injected, 10);
  EXPECT_GE(retried, injected - metric_or(m, "nexus_gateway_retry_budget_exhausted_total", {}));
  EXPECT_EQ(counts.total(), kClients * kPerClient);
  EXPECT_GE(counts.ok, 0.995 * counts.total());
}

TEST(GatewayFaults, SigtermDrainsTheGatewayItself) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  HttpClient streaming("127.0.0.1", gw.port);
  streaming.send("POST", "/v1/completions",
                 json{{"prompt", "Once"}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}}.dump());
  ASSERT_EQ(streaming.read_header().status, 200);
  ASSERT_TRUE(streaming.next_event().has_value());  // started
  ASSERT_EQ(kill(gw.proc.pid(), SIGTERM), 0);
  std::this_thread::sleep_for(milliseconds(100));
  HttpClient late("127.0.0.1", gw.port);
  const HttpResponse refused = late.post("/v1/completions", R"({"prompt":"x","max_tokens":2})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("server_shutting_down"), std::string::npos);
  // The running stream finishes whole.
  bool done = false;
  while (auto ev = streaming.next_event()) done = done || *ev == "data: [DONE]";
  EXPECT_TRUE(done);
  EXPECT_EQ(gw.proc.stop(0, std::chrono::seconds(15)), 0);
}

TEST(GatewayFaults, ADrainingReplicaIsSkipped) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  // One sequence at a time, so that eight long generations queued on
  // replica 0 keep it draining after its SIGTERM well past this test's
  // requests (about 0.1 s each at stories260K's speed).
  ReplicaSet rs(model, 2, {"--max-seqs", "1"});
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--policy", "round-robin"});
  ASSERT_GT(gw.port, 0);
  std::vector<std::unique_ptr<HttpClient>> long_runs;
  for (int i = 0; i < 8; ++i) {
    long_runs.push_back(std::make_unique<HttpClient>("127.0.0.1", rs.ports[0]));
    long_runs.back()->send("POST", "/v1/completions",
                           json{{"prompt", "Once"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}}.dump());
  }
  ASSERT_EQ(long_runs[0]->read_header().status, 200);
  // Most of the eight in its engine (one running, the rest waiting), then SIGTERM, and
  // wait for the signal to take effect.
  HttpClient status("127.0.0.1", rs.ports[0]);
  auto load = [&] { return json::parse(status.get("/load").body); };
  bool queued = false;
  for (int i = 0; i < 500 && !queued; ++i) {
    const json l = load();
    queued = l["running"].get<int>() + l["waiting"].get<int>() >= 6;
    if (!queued) std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_TRUE(queued);
  ASSERT_EQ(kill(rs.servers[0]->proc.pid(), SIGTERM), 0);
  json l;
  for (int i = 0; i < 500; ++i) {
    l = load();  // /load still answers while draining
    if (l["draining"] == true) break;
    std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_EQ(l["draining"], true);
  EXPECT_GE(l["running"].get<int>() + l["waiting"].get<int>(), 1);

  const std::string draining = replica_id(rs.ports[0]);
  const double before =
      metric_or(scrape_metrics(gw.port), "nexus_gateway_routing_decisions_total", {{"replica", draining}});
  CallCounts counts;
  HttpClient c("127.0.0.1", gw.port);
  for (int i = 0; i < 20; ++i) counts.add(call(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}}));
  const auto m = scrape_metrics(gw.port);
  const double routed = metric_or(m, "nexus_gateway_routing_decisions_total", {{"replica", draining}}) - before;
  counts.print("draining replica");
  std::printf("[draining] routed to the draining replica %.0f, retried for draining %.0f\n", routed,
              metric_or(m, "nexus_gateway_retries_total", {{"reason", "draining"}}));
  EXPECT_EQ(counts.ok, 20);  // round-robin, yet none got the draining replica's 503
  EXPECT_LE(routed, 1);      // at most one before a poll saw it (then retried elsewhere)
}

TEST(GatewayFaults, StoppingWithAStreamInFlightEndsItWithAnErrorEvent) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--drain-timeout", "0"});  // SIGTERM stops at once
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  c.send("POST", "/v1/completions",
         json{{"prompt", "Once"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}}.dump());
  ASSERT_EQ(c.read_header().status, 200);
  ASSERT_TRUE(c.next_event().has_value());
  ASSERT_EQ(kill(gw.proc.pid(), SIGTERM), 0);
  std::string error;
  bool done = false;
  int events = 1;
  while (auto ev = c.next_event()) {
    ++events;
    if (*ev == "data: [DONE]") done = true;
    else if (ev->find("\"error\"") != std::string::npos) error = *ev;
  }
  std::printf("[stop] %d events, then: %s\n", events, error.c_str());
  EXPECT_NE(error.find("server_shutting_down"), std::string::npos);
  EXPECT_TRUE(done);
  EXPECT_EQ(gw.proc.stop(0, std::chrono::seconds(15)), 0);
}
