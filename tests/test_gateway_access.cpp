// The gateway's access layer end to end: `nexus gateway --api-keys FILE` in
// front of real `nexus serve` replicas on loopback (keys accepted and
// refused, 429 with Retry-After once a tenant's request or token bucket is
// empty, the tokens counted from the replicas' usage, streamed and not),
// and `nexus serve --api-key`. Limits are tiny so a bucket empties after
// one request and refills in hours: the tests assert counts, never times.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/gateway_load.h"
#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

std::string write_keys(const std::string& text) {
  const std::string path = make_temp_dir() + "/keys.txt";
  std::ofstream(path) << text;
  return path;
}

Headers bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

const json kCompletion = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"ignore_eos", true}};

std::string error_code(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"]["code"].is_string() ? j["error"]["code"].get<std::string>()
                                                                                : "(none: " + body + ")";
}

}  // namespace

TEST(GatewayAccess, KeysAreCheckedAndHealthAndMetricsStayOpen) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-good team-a\n")});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);

  HttpResponse none = c.request("POST", "/v1/completions", kCompletion.dump());
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(error_code(none.body), "invalid_api_key");
  EXPECT_EQ(none.header("www-authenticate"), "Bearer");
  HttpResponse wrong = c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-bad"));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(error_code(wrong.body), "invalid_api_key");
  EXPECT_EQ(c.request("GET", "/v1/models").status, 401);

  HttpResponse ok = c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-good"));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(c.request("GET", "/v1/models", "", bearer("sk-good")).status, 200);
  EXPECT_EQ(c.get("/health").status, 200);
  EXPECT_EQ(c.get("/").status, 200);  // the web chat's page, relayed without a tenant
  const auto m = scrape_metrics(gw.port);
  EXPECT_EQ(metric_or(m, "nexus_gateway_unauthorized_total", {}), 3);
  EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_requests_total", {{"tenant", "team-a"}}), 2);
  EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_in_flight_requests", {{"tenant", "team-a"}}, -1), 0);
  // Non-streamed usage: 8 completion tokens (ignore_eos).
  EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_tokens_total", {{"tenant", "team-a"}, {"kind", "completion"}}), 8);
  EXPECT_GT(metric_or(m, "nexus_gateway_tenant_tokens_total", {{"tenant", "team-a"}, {"kind", "prompt"}}), 0);
  {
    // A browser's realtime handshake presents its key as a subprotocol.
    HttpClient ws("127.0.0.1", gw.port);
    ws.send("GET", "/v1/realtime", "",
            {{"Upgrade", "websocket"}, {"Connection", "Upgrade"}, {"Sec-WebSocket-Version", "13"},
             {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
             {"Sec-WebSocket-Protocol", "realtime, openai-insecure-api-key.sk-good"}});
    const HttpResponse up = ws.read_header();
    EXPECT_EQ(up.status, 101);
    EXPECT_EQ(up.header("sec-websocket-protocol"), "realtime");
  }
}

TEST(GatewayAccess, EmptyRequestBucketAnswers429WithRetryAfter) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  // 0.0001 requests a second: a bucket of one request, refilled in ~3 h.
  // team-b has no limit and is not affected by team-a's.
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-a team-a 0.0001\nsk-b team-b\n")});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  int ok = 0, limited = 0;
  for (int i = 0; i < 6; ++i) {
    const HttpResponse r = c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-a"));
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++limited;
      EXPECT_EQ(error_code(r.body), "rate_limit_exceeded");
      EXPECT_EQ(json::parse(r.body)["error"]["type"], "requests");
      const std::string retry_after = r.header("retry-after");
      ASSERT_FALSE(retry_after.empty());
      EXPECT_GE(std::stoi(retry_after), 1);
    }
  }
  std::printf("[requests/s] team-a: %d ok, %d limited\n", ok, limited);
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(limited, 5);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-b")).status, 200);
  const auto m = scrape_metrics(gw.port);
  EXPECT_EQ(metric_or(m, "nexus_gateway_rate_limited_total", {{"tenant", "team-a"}, {"limit", "requests_per_second"}}), 5);
  EXPECT_EQ(metric_or(m, "nexus_gateway_rate_limited_total", {{"tenant", "team-b"}, {"limit", "requests_per_second"}}), 0);
  EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_requests_total", {{"tenant", "team-b"}}), 3);
}

TEST(GatewayAccess, StreamedTokensAreCountedAndEmptyTheTokenBucket) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  // One token a minute: the first request is admitted, its ~12 tokens put
  // the bucket in debt, and the next ones are refused until it refills.
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-s streamer - 1\nsk-u asker - 1\n")});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  json body = kCompletion;
  body["stream"] = true;

  // The client did not ask for usage: the stream it gets has none (the
  // gateway asked the replica for it and strips it).
  c.send("POST", "/v1/completions", body.dump(), bearer("sk-s"));
  ASSERT_EQ(c.read_header().status, 200);
  int text_events = 0;
  bool done = false;
  while (auto ev = c.next_event()) {
    if (*ev == "data: [DONE]") {
      done = true;
      continue;
    }
    EXPECT_EQ(ev->find("usage"), std::string::npos) << *ev;
    EXPECT_EQ(ev->find("\"choices\":[]"), std::string::npos) << *ev;
    ++text_events;
  }
  EXPECT_TRUE(done);
  EXPECT_GE(text_events, 8);
  HttpResponse dry = c.request("POST", "/v1/completions", body.dump(), bearer("sk-s"));
  EXPECT_EQ(dry.status, 429);
  EXPECT_EQ(json::parse(dry.body)["error"]["type"], "tokens");
  EXPECT_GE(std::stoi(dry.header("retry-after").empty() ? "0" : dry.header("retry-after")), 1);

  // A client that asked for usage gets the usage chunk as the replica sent it.
  body["stream_options"] = {{"include_usage", true}};
  c.send("POST", "/v1/completions", body.dump(), bearer("sk-u"));
  ASSERT_EQ(c.read_header().status, 200);
  int usage_chunks = 0;
  while (auto ev = c.next_event())
    if (ev->find("\"choices\":[]") != std::string::npos && ev->find("\"completion_tokens\":8") != std::string::npos)
      ++usage_chunks;
  EXPECT_EQ(usage_chunks, 1);
  EXPECT_EQ(c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-u")).status, 429);

  const auto m = scrape_metrics(gw.port);
  for (const char* t : {"streamer", "asker"}) {
    EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_tokens_total", {{"tenant", t}, {"kind", "completion"}}), 8) << t;
    EXPECT_EQ(metric_or(m, "nexus_gateway_rate_limited_total", {{"tenant", t}, {"limit", "tokens_per_minute"}}), 1)
        << t;
    EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_requests_total", {{"tenant", t}}), 1) << t;
  }
}

// A tenant's max_priority (issue 42): a request above it is answered 400 by
// the gateway, in OpenAI's shape, on every completions path; the replica,
// whose own cap is 1000 here, would have taken it.
TEST(GatewayAccess, APriorityAboveTheTenantsCapIs400FromTheGateway) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1, {"--max-request-priority", "1000"});
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-a team-a - - default\nsk-b team-b\n")});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  json body = kCompletion;
  json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  body["priority"] = chat["priority"] = "interactive";
  for (const auto& [path, b] : {std::pair{"/v1/completions", body}, std::pair{"/completions", body},
                                std::pair{"/v1/chat/completions", chat}, std::pair{"/chat/completions", chat}}) {
    const HttpResponse r = c.request("POST", path, b.dump(), bearer("sk-a"));
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    EXPECT_EQ(error_code(r.body), "priority_above_cap") << path;
    EXPECT_NE(r.body.find("this API key allows, default (0)"), std::string::npos) << r.body;
  }
  // The agent protocols are generations too: capped, each in its own error shape.
  json responses = {{"input", "Hi"}, {"max_output_tokens", 2}, {"priority", "interactive"}};
  const HttpResponse rr = c.request("POST", "/v1/responses", responses.dump(), bearer("sk-a"));
  EXPECT_EQ(rr.status, 400) << rr.body;
  EXPECT_EQ(error_code(rr.body), "priority_above_cap") << rr.body;
  json messages = {{"model", "stories260K"}, {"max_tokens", 2}, {"priority", "interactive"},
                   {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  const HttpResponse rm = c.request("POST", "/v1/messages", messages.dump(), bearer("sk-a"));
  EXPECT_EQ(rm.status, 400) << rm.body;
  const json am = json::parse(rm.body, nullptr, false);
  EXPECT_EQ(am["type"], "error") << rm.body;  // Anthropic's shape
  EXPECT_EQ(am["error"]["type"], "invalid_request_error") << rm.body;
  EXPECT_NE(rm.body.find("this API key allows"), std::string::npos) << rm.body;
  int ok = 0;
  for (const json& p : {json("default"), json("batch"), json(nullptr)}) {
    body["priority"] = p;
    const HttpResponse r = c.request("POST", "/v1/completions", body.dump(), bearer("sk-a"));
    EXPECT_EQ(r.status, 200) << p << ": " << r.body;
    ok += r.status == 200;
  }
  body["priority"] = 1000;  // team-b has no cap: the replica's applies
  EXPECT_EQ(c.request("POST", "/v1/completions", body.dump(), bearer("sk-b")).status, 200);
  const auto m = scrape_metrics(gw.port);
  EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_requests_total", {{"tenant", "team-a"}}), ok)
      << "refused requests are not counted as admitted";
}

TEST(ServeApiKey, RequiresTheKeyButHealthStaysOpen) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ServeProcess s(model, {"--api-key", "sk-serve"});
  ASSERT_GT(s.port, 0);
  HttpClient c("127.0.0.1", s.port);
  EXPECT_EQ(c.get("/health").status, 200);
  EXPECT_EQ(c.get("/load").status, 200);
  EXPECT_EQ(c.get("/metrics").status, 200);
  HttpResponse none = c.request("POST", "/v1/completions", kCompletion.dump());
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(error_code(none.body), "invalid_api_key");
  EXPECT_EQ(c.request("GET", "/v1/models", "", bearer("sk-wrong")).status, 401);
  EXPECT_EQ(c.request("GET", "/v1/models", "", bearer("sk-serve")).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-serve")).status, 200);
  // The web chat's files are public (the page asks for the key); the API is not.
  EXPECT_EQ(c.get("/").status, 200);
  EXPECT_EQ(c.get("/ui/auth.js").status, 200);
}

// A browser's WebSocket cannot send Authorization: the realtime handshake
// presents the key as the subprotocol "openai-insecure-api-key.KEY", and
// the server selects "realtime" from the offered list.
TEST(ServeApiKey, RealtimeHandshakeTakesTheKeyAsASubprotocol) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ServeProcess s(model, {"--api-key", "sk-serve"});
  ASSERT_GT(s.port, 0);
  auto handshake = [&](const std::string& protocols) {
    HttpClient c("127.0.0.1", s.port);
    Headers h{{"Upgrade", "websocket"}, {"Connection", "Upgrade"}, {"Sec-WebSocket-Version", "13"},
              {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}};
    if (!protocols.empty()) h.emplace_back("Sec-WebSocket-Protocol", protocols);
    c.send("GET", "/v1/realtime", "", h);
    return c.read_header();
  };
  const HttpResponse ok = handshake("realtime, openai-insecure-api-key.sk-serve");
  EXPECT_EQ(ok.status, 101);
  EXPECT_EQ(ok.header("sec-websocket-protocol"), "realtime");
  EXPECT_EQ(handshake("realtime, openai-insecure-api-key.sk-wrong").status, 401);
  EXPECT_EQ(handshake("realtime").status, 401);
  EXPECT_EQ(handshake("").status, 401);
}

TEST(GatewayAccess, ReplicaKeyReplacesTheClientsKey) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1, {"--api-key", "sk-replica"});
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-tenant t\n"), "--replica-api-key", "sk-replica"});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  // The gateway's health checks reach the replica (its /health is open).
  for (int i = 0; i < 100 && c.get("/health").status != 200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  HttpResponse r = c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-tenant"));
  EXPECT_EQ(r.status, 200) << r.body;
  // The replica's key does not open the gateway.
  EXPECT_EQ(c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-replica")).status, 401);
}

TEST(GatewayAccess, ABodyOverTheLimitIs413BeforeItIsRead) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-good team-a\n")});
  ASSERT_GT(gw.port, 0);
  // The header alone announces 2 MB (the gateway's limit is 1 MiB): the
  // answer comes without the body being sent, and no replica sees it.
  HttpClient c("127.0.0.1", gw.port);
  c.write_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-good\r\n"
              "Content-Type: application/json\r\nContent-Length: 2000000\r\n\r\n");
  std::string raw;
  for (std::string part; (part = c.read_raw_some()).size() > 0;) raw += part;
  ASSERT_EQ(raw.rfind("HTTP/1.1 413", 0), 0u) << raw;
  EXPECT_NE(raw.find("\"request_too_large\""), std::string::npos) << raw;
  EXPECT_NE(raw.find("1048576 bytes"), std::string::npos) << raw;
  // A completion that does get through is counted, so a zero below means
  // the refused one never reached the replica.
  HttpClient ok("127.0.0.1", gw.port);
  ASSERT_EQ(ok.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-good")).status, 200);
  double finished = 0;
  for (const MetricSample& s : scrape_metrics(rs.ports[0]))
    if (s.name == "nexus_requests_total") finished += s.value;
  EXPECT_EQ(finished, 1) << "the replica saw the refused request";
}

TEST(GatewayAccess, CorsPreflightsAreAnsweredAndEveryResponseCarriesOneAllowOrigin) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  // The replica has a CORS policy of its own: the gateway's replaces it, so
  // a browser sees exactly one Access-Control-Allow-Origin.
  ReplicaSet rs(model, 1, {"--cors-allow-origin", "*"});
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--api-keys", write_keys("sk-good team-a\n"), "--cors-allow-origin",
                               "https://app.example"});
  ASSERT_GT(gw.port, 0);
  HttpClient c("127.0.0.1", gw.port);
  const Headers from_app = {{"Origin", "https://app.example"}};

  // Preflight: no key needed, answered by the gateway.
  HttpResponse pre = c.request("OPTIONS", "/v1/chat/completions", "",
                               {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"},
                                {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_EQ(pre.status, 204) << pre.body;
  EXPECT_EQ(pre.header("access-control-allow-origin"), "https://app.example");
  EXPECT_NE(pre.header("access-control-allow-methods").find("POST"), std::string::npos);
  EXPECT_EQ(pre.header("access-control-allow-headers"), "authorization, content-type");
  EXPECT_EQ(pre.header("content-length"), "");  // none on a 204 (RFC 9110 8.6)
  HttpResponse other = c.request("OPTIONS", "/v1/chat/completions", "",
                                 {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(other.status, 403);
  EXPECT_EQ(error_code(other.body), "cors_origin_not_allowed");
  EXPECT_EQ(other.header("access-control-allow-origin"), "");

  // The gateway's own answers (401) and relayed ones, streamed or not.
  Headers with_key = from_app;
  with_key.emplace_back("Authorization", "Bearer sk-good");
  HttpResponse no_key = c.request("POST", "/v1/completions", kCompletion.dump(), from_app);
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(no_key.header("access-control-allow-origin"), "https://app.example");
  HttpResponse ok = c.request("POST", "/v1/completions", kCompletion.dump(), with_key);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.header("access-control-allow-origin"), "https://app.example");  // not the replica's "*"
  EXPECT_EQ(ok.header("vary"), "Origin");
  {
    // Exactly one of each on the wire (the parsed map would hide a second),
    // on a stream: its head is the replica's, relayed.
    HttpClient raw("127.0.0.1", gw.port);
    json stream_body = kCompletion;
    stream_body["stream"] = true;
    const std::string body = stream_body.dump();
    raw.write_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
                  "Authorization: Bearer sk-good\r\nContent-Type: application/json\r\nConnection: close\r\n"
                  "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    std::string answer;
    for (std::string part; !(part = raw.read_raw_some()).empty();) answer += part;
    answer = answer.substr(0, answer.find("\r\n\r\n"));
    for (char& ch : answer) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    auto count = [&](const std::string& name) {
      size_t n = 0;
      for (size_t at = answer.find(name); at != std::string::npos; at = answer.find(name, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("\r\naccess-control-allow-origin:"), 1u) << answer;
    EXPECT_EQ(count("\r\nvary:"), 1u) << answer;
  }
  json streamed = kCompletion;
  streamed["stream"] = true;
  HttpClient s("127.0.0.1", gw.port);
  s.send("POST", "/v1/completions", streamed.dump(), with_key);
  const HttpResponse head = s.read_header();
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("access-control-allow-origin"), "https://app.example");
  s.finish();
  // Another origin's real request gets no CORS header (the browser blocks it).
  Headers evil = {{"Origin", "https://evil.example"}, {"Authorization", "Bearer sk-good"}};
  HttpResponse blocked = c.request("POST", "/v1/completions", kCompletion.dump(), evil);
  EXPECT_EQ(blocked.status, 200);
  EXPECT_EQ(blocked.header("access-control-allow-origin"), "");
}

TEST(GatewayAccess, TheAccessLogHasALogfmtLinePerRequest) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  // stderr (the log) into the pipe the test reads.
  ChildProcess gw({"/bin/sh", "-c",
                   "exec " + shell_quote(nexus_binary()) + " gateway --listen 127.0.0.1:0 --replica " +
                       replica_url(rs.ports[0]) + " --api-keys " + shell_quote(write_keys("sk-good team-a\n")) +
                       " 2>&1"});
  uint16_t port = 0;
  for (int i = 0; i < 10 && port == 0; ++i) {
    const auto line = gw.read_line();
    ASSERT_TRUE(line.has_value()) << "no 'listening on' line";
    std::smatch m;
    if (std::regex_match(*line, m, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))")))
      port = static_cast<uint16_t>(std::stoi(m[1]));
  }
  ASSERT_GT(port, 0);
  HttpClient c("127.0.0.1", port);
  EXPECT_EQ(c.request("POST", "/v1/completions", kCompletion.dump(), bearer("sk-good")).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/completions", kCompletion.dump()).status, 401);
  json bad = kCompletion;
  bad["max_tokens"] = -1;
  EXPECT_EQ(c.request("POST", "/v1/completions", bad.dump(), bearer("sk-good")).status, 400);
  const std::string replica = "127.0.0.1:" + std::to_string(rs.ports[0]);
  const std::vector<std::regex> want = {
      std::regex("method=POST path=/v1/completions status=200 replica=" + replica +
                 R"( ms=[0-9.]+ attempts=1 outcome=success tenant=team-a)"),
      std::regex(R"(method=POST path=/v1/completions status=401 replica=- ms=[0-9.]+ attempts=0 outcome=-)"),
      std::regex("method=POST path=/v1/completions status=400 replica=" + replica +
                 R"( ms=[0-9.]+ attempts=1 outcome=client_error tenant=team-a)"),
  };
  for (const std::regex& w : want) {
    std::optional<std::string> line;
    do line = gw.read_line(std::chrono::seconds(10));
    while (line && line->rfind("method=", 0) != 0);  // (start-up lines)
    ASSERT_TRUE(line.has_value()) << "the access log ended early";
    EXPECT_TRUE(std::regex_match(*line, w)) << *line;
  }
}
