// `nexus gateway` in front of real `nexus serve` replicas on loopback: the
// API relayed (streamed and not), each replica's GET /load, and the routing
// policies under concurrent clients: least-load's spread and prefix
// affinity's prefix-cache hit rate against round-robin's.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/gateway_load.h"
#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

std::string replica_id(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace

TEST(GatewayRouting, RelaysTheApiAndReportsLoad) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0) << "nexus gateway did not start";

  HttpClient direct("127.0.0.1", rs.ports[0]);
  const HttpResponse load = direct.get("/load");
  ASSERT_EQ(load.status, 200) << load.body;
  const json l = json::parse(load.body);
  for (const char* k : {"running", "waiting", "kv_used_blocks", "kv_total_blocks", "kv_utilization", "draining"})
    EXPECT_TRUE(l.contains(k)) << k;
  EXPECT_GT(l["kv_total_blocks"].get<int>(), 0);
  EXPECT_EQ(l["draining"], false);
  EXPECT_EQ(direct.request("POST", "/load").status, 405);

  HttpClient c("127.0.0.1", gw.port);
  const HttpResponse health = c.get("/health");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(json::parse(health.body)["replicas_available"], 2);
  const HttpResponse models = c.get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "stories260K");

  // Non-streamed: the same greedy text as the replica gives directly.
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}};
  const HttpResponse via = c.post("/v1/completions", body.dump());
  const HttpResponse ref = direct.post("/v1/completions", body.dump());
  ASSERT_EQ(via.status, 200) << via.body;
  EXPECT_EQ(json::parse(via.body)["choices"][0]["text"], json::parse(ref.body)["choices"][0]["text"]);

  // Streamed chat: events relayed as SSE, ending with [DONE], connection kept.
  const uint16_t local = c.local_port();
  const CallResult s = call(c, "/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 8}, {"stream", true}});
  EXPECT_EQ(s.end, CallEnd::Ok) << s.error;
  EXPECT_GT(s.events, 1);
  EXPECT_EQ(c.local_port(), local);

  // A client error is the replica's answer, relayed as is (not retried).
  const HttpResponse bad = c.post("/v1/completions", R"({"prompt":"x","max_tokens":-1})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_TRUE(json::parse(bad.body)["error"].contains("message"));
  const HttpResponse not_json = c.post("/v1/chat/completions", "{nope");
  EXPECT_EQ(not_json.status, 400);
  EXPECT_EQ(c.get("/v1/realtime").status, 426);  // relayed: the replica wants the WebSocket upgrade
  EXPECT_EQ(c.get("/nowhere").status, 404);

  const auto m = scrape_metrics(gw.port);
  double success = 0, client_errors = 0;
  for (uint16_t p : rs.ports) {
    success += metric_or(m, "nexus_gateway_requests_total", {{"replica", replica_id(p)}, {"outcome", "success"}});
    client_errors += metric_or(m, "nexus_gateway_requests_total", {{"replica", replica_id(p)}, {"outcome", "client_error"}});
  }
  std::printf("[relay] success %.0f, client_error %.0f\n", success, client_errors);
  EXPECT_EQ(success, 3);        // models, completion, chat stream
  EXPECT_EQ(client_errors, 4);  // the two 400s, the 426 and the 404
  EXPECT_EQ(metric_or(m, "nexus_gateway_retries_total", {{"reason", "status_5xx"}}), 0);
  expect_valid_histogram(m, "nexus_gateway_added_latency_seconds");
}

TEST(GatewayRouting, LeastLoadKeepsTheBusiestReplicaNearTheMean) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 3);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--policy", "least-load"});
  ASSERT_GT(gw.port, 0);
  // Warm each replica first (its first requests fault in the model's pages),
  // so that the measurement sees steady speeds; counted out below.
  std::vector<double> warmed;
  for (uint16_t p : rs.ports) {
    HttpClient warm("127.0.0.1", p);
    for (int i = 0; i < 4; ++i) warm.post("/v1/completions", R"({"prompt":"Once","max_tokens":16})");
    warmed.push_back(metric_or(scrape_metrics(p), "nexus_requests_total", {{"finish_reason", "length"}}));
  }

  constexpr int kClients = 16, kPerClient = 30;
  CallCounts counts;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(60));
      for (int i = 0; i < kPerClient; ++i) {
        const json body = {{"prompt", "Once upon a time " + std::to_string(t * 100 + i)},
                           {"max_tokens", 24}, {"ignore_eos", true}, {"stream", (i % 2) == 1}};
        counts.add(call(c, "/v1/completions", body));
      }
    });
  }
  for (auto& th : clients) th.join();
  counts.print("least-load");
  EXPECT_EQ(counts.ok, kClients * kPerClient);

  std::vector<double> served;
  double sum = 0;
  for (size_t i = 0; i < rs.ports.size(); ++i) {
    const auto m = scrape_metrics(rs.ports[i]);
    served.push_back(metric_or(m, "nexus_requests_total", {{"finish_reason", "length"}}) - warmed[i]);
    sum += served.back();
  }
  const double mean = sum / served.size();
  const double busiest = *std::max_element(served.begin(), served.end());
  std::printf("[least-load] per replica: %.0f %.0f %.0f (mean %.1f, busiest / mean %.2f)\n", served[0], served[1],
              served[2], mean, busiest / mean);
  EXPECT_EQ(sum, kClients * kPerClient);
  EXPECT_LE(busiest, 1.5 * mean);
}

namespace {

// Prefix-cache hit rate (hit / queried prompt tokens, summed over the
// replicas) of a workload where each request starts with one of kGroups
// shared 200-token system prompts (token ids) and ends with its own 8
// tokens; the replicas' KV pools hold about three groups' prefixes each.
double prefix_hit_rate(const std::string& model, const std::string& policy) {
  constexpr int kGroups = 9, kClients = 4, kPerClient = 45, kBlockBytes = 10240;  // stories260K, f16
  ReplicaSet rs(model, 3, {"--max-seqs", "4", "--kv-memory", std::to_string(44 * kBlockBytes)});
  EXPECT_TRUE(rs.all_started());
  // Four clients put at most 4 requests on a replica, and its small KV pool
  // adds up to 2 (a full pool) to its score: a threshold of 6 keeps every
  // prefix on its replica here (the override itself: test_gateway_units).
  GatewayProcess gw(rs.ports, {"--policy", policy, "--prefix-threshold", "6"});
  EXPECT_GT(gw.port, 0);
  if (!rs.all_started() || gw.port == 0) return -1;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> id(3, 511);
  std::vector<std::vector<int>> system(kGroups);
  for (auto& s : system)
    for (int i = 0; i < 200; ++i) s.push_back(id(rng));

  CallCounts counts;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 r(static_cast<unsigned>(t + 1));
      std::uniform_int_distribution<int> group(0, kGroups - 1), tail(3, 511);
      HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(60));
      for (int i = 0; i < kPerClient; ++i) {
        std::vector<int> prompt = system[static_cast<size_t>(group(r))];
        for (int k = 0; k < 8; ++k) prompt.push_back(tail(r));
        counts.add(call(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}}));
      }
    });
  }
  for (auto& th : clients) th.join();
  counts.print(policy.c_str());
  EXPECT_EQ(counts.ok, kClients * kPerClient);
  double hit = 0, queried = 0;
  for (uint16_t p : rs.ports) {
    const auto m = scrape_metrics(p);
    hit += metric_or(m, "nexus_prefix_cache_hit_tokens_total", {});
    queried += metric_or(m, "nexus_prefix_cache_queried_tokens_total", {});
  }
  const auto g = scrape_metrics(gw.port);
  std::printf("[%s] prefix cache: %.0f of %.0f prompt tokens hit (%.1f%%); affinity hit %.0f miss %.0f overflow %.0f\n",
              policy.c_str(), hit, queried, queried > 0 ? 100 * hit / queried : 0.0,
              metric_or(g, "nexus_gateway_prefix_affinity_total", {{"result", "hit"}}),
              metric_or(g, "nexus_gateway_prefix_affinity_total", {{"result", "miss"}}),
              metric_or(g, "nexus_gateway_prefix_affinity_total", {{"result", "overflow"}}));
  return queried > 0 ? hit / queried : 0;
}

}  // namespace

TEST(GatewayRouting, PrefixAffinityDoublesThePrefixCacheHitRateOfRoundRobin) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const double rr = prefix_hit_rate(model, "round-robin");
  const double prefix = prefix_hit_rate(model, "prefix");
  std::printf("[prefix vs round-robin] hit rate %.3f vs %.3f (x%.2f)\n", prefix, rr, rr > 0 ? prefix / rr : 0.0);
  ASSERT_GE(rr, 0);
  EXPECT_GE(prefix, 2 * rr);
  EXPECT_GT(prefix, 0.5);
}

TEST(GatewayRouting, TrafficShiftsAwayFromASlowReplica) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 3);
  ASSERT_TRUE(rs.all_started());
  // Every attempt to replica 0 waits 50 ms first: its requests stay in
  // flight longer, so least-load sends it fewer.
  GatewayProcess gw(rs.ports, {"--fault", "delay=100:50@" + replica_url(rs.ports[0])});
  ASSERT_GT(gw.port, 0);
  constexpr int kClients = 8, kPerClient = 25;
  CallCounts counts;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&] {
      HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(60));
      for (int i = 0; i < kPerClient; ++i)
        counts.add(call(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}}));
    });
  }
  for (auto& th : clients) th.join();
  counts.print("delay=100:50 on one replica");
  EXPECT_EQ(counts.ok, kClients * kPerClient);
  const auto m = scrape_metrics(gw.port);
  std::vector<double> routed;
  for (uint16_t p : rs.ports)
    routed.push_back(metric_or(m, "nexus_gateway_routing_decisions_total", {{"replica", replica_id(p)}}));
  std::printf("[slow replica] routed: slow %.0f, others %.0f %.0f\n", routed[0], routed[1], routed[2]);
  EXPECT_LT(routed[0], 0.5 * std::min(routed[1], routed[2]));
}

TEST(GatewayRouting, WithoutReplicasEveryAnswerIsAnOpenAIError) {
  // A loopback port nothing listens on (bound, then closed).
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  GatewayProcess gw({ntohs(a.sin_port)}, {"--probe-timeout-ms", "100", "--backoff-base-ms", "1"});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  for (bool stream : {false, true}) {
    const HttpResponse r = c.post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 2}, {"stream", stream}}.dump());
    EXPECT_TRUE(r.status == 502 || r.status == 503) << r.status << " " << r.body;
    const json body = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r.body;
    EXPECT_TRUE(body["error"]["message"].is_string()) << r.body;
    EXPECT_EQ(body["error"]["type"], "server_error");
  }
  // Once its breaker opens, the gateway says it has no replica.
  bool unhealthy = false;
  for (int i = 0; i < 100 && !unhealthy; ++i) {
    unhealthy = c.get("/health").status == 503;
    if (!unhealthy) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(unhealthy);
  const HttpResponse r = c.post("/v1/completions", R"({"prompt":"x"})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("no_replica_available"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("retry-after"), "1");
}

// A replica named by a host name that does not resolve (a Kubernetes pod
// that does not exist yet) does not stop the gateway: requests go to the
// replicas that do, and health checks keep trying the name (each /health
// probe resolves it again), so its breaker opens and it is not counted.
TEST(GatewayRouting, AReplicaWhoseNameDoesNotResolveIsDownNotFatal) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  // "localhost" is a name too: the live replica is reached through the resolver.
  GatewayProcess gw({}, {"--replica", "http://localhost:" + std::to_string(rs.ports[0]), "--replica",
                         "http://nexus-replica-7.nexus-replicas.invalid:8080", "--policy", "round-robin",
                         "--backoff-base-ms", "1", "--health-interval-ms", "50"});
  ASSERT_GT(gw.port, 0) << "nexus gateway did not start";
  HttpClient c("127.0.0.1", gw.port);
  for (int i = 0; i < 6; ++i) {
    const HttpResponse r = c.post("/v1/completions", R"({"prompt":"Once","max_tokens":2,"temperature":0})");
    EXPECT_EQ(r.status, 200) << i << " " << r.body;
  }
  int available = -1;
  for (int i = 0; i < 100 && available != 1; ++i) {
    const HttpResponse h = c.get("/health");
    available = json::parse(h.body, nullptr, false).value("replicas_available", -1);
    if (available != 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(available, 1);
}

// --replicas-from dns:NAME:PORT: the gateway starts with no replica and
// adds each address NAME resolves to ("localhost": 127.0.0.1, and ::1 where
// /etc/hosts lists it, which no replica listens on and which health checks
// therefore mark down). Requests then go to the discovered replica.
TEST(GatewayRouting, DnsDiscoveryAddsTheAddressesANameResolvesTo) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw({}, {"--replicas-from", "dns:localhost:" + std::to_string(rs.ports[0]), "--dns-interval-ms", "100",
                         "--backoff-base-ms", "1", "--health-interval-ms", "50"});
  ASSERT_GT(gw.port, 0) << "nexus gateway did not start";
  HttpClient c("127.0.0.1", gw.port);
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = c.get("/health").status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(up) << "no replica was discovered within 5 s";
  for (int i = 0; i < 4; ++i) {
    const HttpResponse r = c.post("/v1/completions", R"({"prompt":"Once","max_tokens":2,"temperature":0})");
    EXPECT_EQ(r.status, 200) << i << " " << r.body;
  }
  EXPECT_EQ(metric_or(scrape_metrics(gw.port), "nexus_gateway_routing_decisions_total",
                      {{"replica", replica_id(rs.ports[0])}}),
            4)
      << "the discovered replica's series";
  // Re-resolving the same answer adds nothing: still one 127.0.0.1 replica.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string text = c.get("/metrics").body;
  size_t series = 0;
  for (size_t at = 0; (at = text.find("nexus_gateway_breaker_state{replica=\"127.0.0.1:", at)) != std::string::npos; ++at)
    ++series;
  EXPECT_EQ(series, 1u);
}

TEST(GatewayRouting, BadFlagsAreRefusedByName) {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c : {Case{"gateway", "--replica is required"},
                        Case{"gateway --replica nope", "'nope' is not a replica URL"},
                        Case{"gateway --replica http://127.0.0.1:1 --policy fastest", "unknown policy 'fastest'"},
                        Case{"gateway --replica http://127.0.0.1:1 --fault abort=30", "expected abort=PCT:STATUS"},
                        Case{"gateway --replica http://127.0.0.1:1 --load-interval-ms 500", "500 is outside 1 to 100"},
                        Case{"gateway --replica http://127.0.0.1:1 --listen nowhere", "--listen: expected HOST:PORT"},
                        Case{"gateway --replicas-from nexus:8080", "expected dns:NAME:PORT"},
                        Case{"gateway --replicas-from dns:nexus:99999", "'99999' is not a port"},
                        Case{"gateway --replica http://127.0.0.1:1 --cors-allow-origin app.example/x",
                             "'app.example/x' is not an origin"}}) {
    const CommandResult r = run_nexus(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
  }
  const CommandResult twice = run_nexus("gateway --replica http://127.0.0.1:1 --replica http://127.0.0.1:1/v1");
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.err.find("listed twice"), std::string::npos) << twice.err;
}

TEST(GatewayRouting, PriorityPassesThroughToTheReplica) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 4}};
  for (const char* p : {"interactive", "batch"}) {
    body["priority"] = p;
    const HttpResponse r = c.request("POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << p << ": " << r.body;
  }
  // The field reaches the replica as sent: its check answers, naming it.
  body["priority"] = "urgent";
  const HttpResponse bad = c.request("POST", "/v1/completions", body.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(json::parse(bad.body)["error"]["param"], "priority") << bad.body;
}
