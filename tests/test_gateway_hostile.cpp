// The gateway against hostile clients and misbehaving replicas (issue 42),
// end to end on loopback: bodies nested 20,000 to 500,000 levels deep under
// every routing policy and under --api-keys, a replica's 4xx answers (its
// breaker stays closed), a replica whose SSE event never ends or whose
// stream the client left, a replica answering 101 to a POST, and requests
// in absolute-form. Each test checks the answer's status and OpenAI error
// shape, that every process is still there, and that a normal request
// made meanwhile succeeded.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/fake_replica.h"
#include "support/gateway_load.h"
#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

std::string write_keys(const std::string& text) {
  const std::string path = make_temp_dir() + "/keys.txt";
  std::ofstream(path) << text;
  return path;
}

const Headers kBearer = {{"Authorization", "Bearer sk-test"}};
const json kNormal = {{"prompt", "Once upon a time"}, {"max_tokens", 8}};

void expect_error(const HttpResponse& r, int status, const std::string& type, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body.substr(0, 300);
  const json e = error_of(r.body);
  EXPECT_EQ(e.value("type", ""), type) << r.body.substr(0, 300);
  EXPECT_EQ(e.value("code", ""), code) << r.body.substr(0, 300);
  EXPECT_TRUE(e.contains("message") && e["message"].is_string()) << r.body.substr(0, 300);
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

// 100,000 nested arrays in a prompt and in a message's content (200 KB),
// 20,000 (40 KB) and 500,000 (1 MB): a 400 nesting_too_deep, from the
// gateway where it must read the body (--policy prefix to hash it,
// --api-keys to add include_usage to a stream), else from the replica.
// Before: the gateway's dump() of the prefix text or of the rewritten body
// overflowed its stack.
TEST(GatewayHostile, DeepJsonIsA400UnderEveryPolicyAndKillsNothing) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  const std::string keys = write_keys("sk-test team-a\n");
  const std::vector<std::pair<std::string, std::vector<std::string>>> configs = {
      {"least-load", {"--policy", "least-load"}},
      {"prefix", {"--policy", "prefix"}},
      {"round-robin", {"--policy", "round-robin"}},
      {"api-keys, streamed", {"--policy", "prefix", "--api-keys", keys}},
      {"api-keys, streamed, least-load", {"--api-keys", keys}},
  };
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"prompt 100k", R"({"prompt":)" + nested(100'000) + R"(,"max_tokens":4})"},
      {"content 100k", R"({"messages":[{"role":"user","content":)" + nested(100'000) + R"(}],"max_tokens":4})"},
      {"prompt 20k (40 KB)", R"({"prompt":)" + nested(20'000) + R"(,"max_tokens":4})"},
      {"content 500k (1 MB)", R"({"messages":[{"role":"user","content":)" + nested(500'000) + R"(}],"max_tokens":4})"},
  };
  for (const auto& [name, args] : configs) {
    SCOPED_TRACE(name);
    const bool keyed = name.starts_with("api-keys");
    GatewayProcess gw(rs.ports, args);
    ASSERT_GT(gw.port, 0);
    BackgroundTraffic normal(gw.port, keyed ? kBearer : Headers{});
    HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(30));
    for (const auto& [what, body] : bodies) {
      SCOPED_TRACE(what);
      std::string b = body;
      if (keyed) b.insert(1, R"("stream":true,)");
      try {
        expect_error(c.request("POST", what.starts_with("prompt") ? "/v1/completions" : "/v1/chat/completions", b,
                               keyed ? kBearer : Headers{}),
                     400, "invalid_request_error", "nesting_too_deep");
      } catch (const std::exception& e) {
        ADD_FAILURE() << "no answer: " << e.what();
        break;
      }
    }
    normal.finish();
    EXPECT_GE(normal.ok, 1);
    EXPECT_EQ(normal.failed + normal.query_of_death, 0);
    EXPECT_TRUE(answers_health(gw.port));
    for (uint16_t p : rs.ports) EXPECT_TRUE(answers_health(p)) << "replica " << p;
  }
}

// A replica's 4xx is the client's doing: relayed, and never a failure of
// the replica (one failure would open this breaker).
TEST(GatewayHostile, AReplicasClientErrorsNeverOpenItsBreaker) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--breaker-failures", "1"});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  for (int i = 0; i < 10; ++i) {
    expect_error(c.post("/v1/completions", "not json"), 400, "invalid_request_error", "invalid_json");
    EXPECT_EQ(c.post("/v1/completions", R"({"prompt":"x","max_tokens":-1})").status, 400);
    EXPECT_EQ(c.post("/v1/nowhere", "{}").status, 404);
  }
  const auto m = scrape_metrics(gw.port);
  const std::string id = "127.0.0.1:" + std::to_string(rs.ports[0]);
  EXPECT_EQ(metric_or(m, "nexus_gateway_breaker_state", {{"replica", id}}, -1), 0);
  EXPECT_EQ(metric_or(m, "nexus_gateway_breaker_transitions_total", {{"replica", id}, {"to", "open"}}), 0);
  EXPECT_EQ(metric_or(m, "nexus_gateway_attempt_failures_total", {{"replica", id}}), 0);
  EXPECT_EQ(metric_or(m, "nexus_gateway_requests_total", {{"replica", id}, {"outcome", "client_error"}}), 30);
  EXPECT_EQ(c.post("/v1/completions", kNormal.dump()).status, 200);
}

namespace {

constexpr const char* kSseHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string chunk(const std::string& bytes) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  return size + bytes + "\r\n";
}

// The gateway's peak resident memory (VmHWM), in MiB.
double peak_rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

}  // namespace

// Under --api-keys the usage tap holds a stream's partial event: a replica
// whose event never ends (256 MiB of one `data:` line) gets at most 1 MiB of
// it held, each byte scanned once, and the stream ends with an error event;
// the gateway closes the replica's connection. Before: it held and rescanned
// all of it (quadratic), and the client waited forever.
TEST(GatewayHostile, AReplicaEventThatNeverEndsEndsTheStreamWithBoundedMemory) {
  std::atomic<size_t> sent{0};
  std::atomic<bool> cut{false};
  FakeReplica replica([&](FakeReplica::Socket& s, const FakeReplica::Request&) {
    if (!FakeReplica::write(s, kSseHead) || !FakeReplica::write(s, chunk("data: {\"choices\":[{\"text\":\"")))
      return false;
    const std::string block = chunk(std::string(64 * 1024, 'x'));
    for (size_t i = 0; i < 4096; ++i, sent += 64 * 1024)  // 256 MiB at most
      if (!FakeReplica::write(s, block)) {
        cut = true;
        return false;
      }
    return false;
  });
  GatewayProcess gw({replica.port()}, {"--api-keys", write_keys("sk-test team-a\n")});
  ASSERT_GT(gw.port, 0);
  const double rss_before = peak_rss_mib(gw.proc.pid());
  HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(20));
  c.send("POST", "/v1/completions", json{{"prompt", "x"}, {"stream", true}}.dump(), kBearer);
  ASSERT_EQ(c.read_header().status, 200);
  std::vector<std::string> events;
  while (auto ev = c.next_event()) events.push_back(*ev);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "data: [DONE]");
  const json err = error_of(events[events.size() - 2].substr(6));
  EXPECT_EQ(err.value("code", ""), "replica_failed") << events[events.size() - 2];
  EXPECT_NE(err.value("message", "").find("longer than 1048576 bytes"), std::string::npos);
  for (int i = 0; i < 200 && !cut; ++i) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(cut) << "the gateway kept reading the replica";
  const double rss_after = peak_rss_mib(gw.proc.pid());
  std::printf("[huge event] replica sent %.1f MiB before the gateway cut it; gateway peak RSS %.1f -> %.1f MiB\n",
              sent / 1048576.0, rss_before, rss_after);
  EXPECT_LT(sent.load(), size_t(64) << 20);
  EXPECT_LT(rss_after - rss_before, 32);
  EXPECT_TRUE(answers_health(gw.port));
}

// A stream whose events the tap strips (the usage chunks the gateway asked
// for and the client did not): nothing is written to the client, so its
// departure is looked for; the gateway then closes the replica's connection.
// Before: the replica streamed on to nobody.
TEST(GatewayHostile, AStreamWhoseClientLeftStopsReadingTheReplica) {
  std::atomic<bool> cut{false};
  FakeReplica replica([&](FakeReplica::Socket& s, const FakeReplica::Request&) {
    if (!FakeReplica::write(s, kSseHead)) return false;
    const std::string usage =
        chunk(R"(data: {"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}})" "\n\n");
    for (int i = 0; i < 3000; ++i) {  // 30 s at most
      if (!FakeReplica::write(s, usage)) {
        cut = true;
        return false;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  });
  GatewayProcess gw({replica.port()}, {"--api-keys", write_keys("sk-test team-a\n")});
  ASSERT_GT(gw.port, 0);
  {
    HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(10));
    c.send("POST", "/v1/completions", json{{"prompt", "x"}, {"stream", true}}.dump(), kBearer);
    ASSERT_EQ(c.read_header().status, 200);
    std::this_thread::sleep_for(milliseconds(200));
  }  // the client leaves
  const auto left = std::chrono::steady_clock::now();
  for (int i = 0; i < 250 && !cut; ++i) std::this_thread::sleep_for(milliseconds(20));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - left).count();
  std::printf("[client gone] the replica's connection ended %.2f s after the client left\n", s);
  EXPECT_TRUE(cut) << "the gateway kept reading the replica for a client that left";
  const auto m = scrape_metrics(gw.port);
  EXPECT_EQ(metric_or(m, "nexus_gateway_requests_total",
                      {{"replica", "127.0.0.1:" + std::to_string(replica.port())}, {"outcome", "client_gone"}}),
            1);
  EXPECT_TRUE(answers_health(gw.port));
}

// 101 Switching Protocols to a POST that asked for no upgrade: the
// connection is no longer HTTP; the gateway answers 502 (the replica's
// failure), never relays the 101. An interim 100 Continue is skipped.
TEST(GatewayHostile, A101ToAPostIs502AndA100IsSkipped) {
  FakeReplica replica([](FakeReplica::Socket& s, const FakeReplica::Request& req) {
    if (req.target() == "/v1/continue") {
      const std::string body = R"({"ok":true})";
      return FakeReplica::write(s, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    }
    FakeReplica::write(s, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    return false;
  });
  GatewayProcess gw({replica.port()}, {"--max-attempts", "2"});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(10));
  const HttpResponse r = c.post("/v1/completions", kNormal.dump());
  expect_error(r, 502, "server_error", "bad_gateway");
  EXPECT_NE(error_of(r.body).value("message", "").find("answered 101"), std::string::npos) << r.body;
  EXPECT_EQ(replica.requests(), 2);  // retried once, as any broken answer
  const HttpResponse ok = c.post("/v1/continue", "{}");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, R"({"ok":true})");
  EXPECT_TRUE(answers_health(gw.port));
}

// Absolute-form targets (RFC 9112 section 3.2.2: a server MUST accept
// them): the gateway's own routes, a relayed request, and a stream whose
// tokens --api-keys counts. Before: /health was relayed to a replica, and
// the usage tap, which goes by the path, missed the stream.
TEST(GatewayHostile, AbsoluteFormTargetsAreServedByTheirPath) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-test team-a\n")});
  ASSERT_GT(gw.port, 0);
  const std::string origin = "http://127.0.0.1:" + std::to_string(gw.port);
  HttpClient c("127.0.0.1", gw.port);
  const HttpResponse health = c.get(origin + "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body, nullptr, false).value("replicas_available", -1), 1) << health.body;
  json body = kNormal;
  body["ignore_eos"] = true;  // 8 tokens each
  const HttpResponse plain = c.request("POST", origin + "/v1/completions", body.dump(), kBearer);
  EXPECT_EQ(plain.status, 200) << plain.body;
  json stream = body;
  stream["stream"] = true;
  c.send("POST", "HTTP://127.0.0.1:" + std::to_string(gw.port) + "/v1/completions", stream.dump(), kBearer);
  ASSERT_EQ(c.read_header().status, 200);
  int events = 0;
  while (auto ev = c.next_event()) ++events;
  EXPECT_GE(events, 2);
  const auto m = scrape_metrics(gw.port);
  // 8 tokens of the non-streamed request and 8 of the stream.
  EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_tokens_total", {{"tenant", "team-a"}, {"kind", "completion"}}), 16);
}
