// The gateway's access layer without sockets: the API-key file (both
// formats, and what it refuses), bearer parsing, token buckets, tenant
// admission with Retry-After, and the stream usage tap (bounded).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "gateway/api_keys.h"
#include "gateway/stream_usage.h"
#include "gateway/tenant_limiter.h"
#include "gateway/token_bucket.h"
#include "server/api_key.h"
#include "util/error.h"
#include "util/json_depth.h"

using namespace nexus::gateway;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
// A body as the gateway parses it (ProxySession::body_json).
nlohmann::ordered_json parsed(const std::string& body) {
  return nexus::parse_json_bounded_or_discarded<nlohmann::ordered_json>(body);
}
}  // namespace

TEST(GatewayApiKeys, ParsesLinesWithCommentsAndOptionalLimits) {
  const ApiKeyTable t = parse_api_keys(
      "# key tenant rps tpm\n"
      "sk-a1  team-a  5  20000\n"
      "\n"
      "sk-a2 team-a 5 20000   # rotated key\n"
      "sk-b team-b - 600\n"
      "sk-c team-c\n",
      "keys.txt");
  ASSERT_EQ(t.tenants.size(), 3u);
  EXPECT_EQ(t.keys.size(), 4u);
  EXPECT_EQ(t.tenants[0].name, "team-a");
  EXPECT_EQ(t.tenants[0].limits.requests_per_second, 5.0);
  EXPECT_EQ(t.tenants[0].limits.tokens_per_minute, 20000.0);
  EXPECT_EQ(t.find("sk-a2"), 0u);
  EXPECT_FALSE(t.tenants[1].limits.requests_per_second);
  EXPECT_EQ(t.tenants[1].limits.tokens_per_minute, 600.0);
  EXPECT_FALSE(t.tenants[2].limits.requests_per_second);
  EXPECT_FALSE(t.tenants[2].limits.tokens_per_minute);
  EXPECT_FALSE(t.find("sk-unknown"));
}

TEST(GatewayApiKeys, ParsesJsonObjectOrArray) {
  const ApiKeyTable t = parse_api_keys(
      R"({"keys": [{"key": "k1", "tenant": "a", "requests_per_second": 2.5},
                   {"key": "k2", "tenant": "b", "tokens_per_minute": 100, "requests_per_second": null}]})",
      "keys.json");
  ASSERT_EQ(t.tenants.size(), 2u);
  EXPECT_EQ(t.tenants[0].limits.requests_per_second, 2.5);
  EXPECT_EQ(t.tenants[1].limits.tokens_per_minute, 100.0);
  EXPECT_FALSE(t.tenants[1].limits.requests_per_second);
  const ApiKeyTable a = parse_api_keys(R"([{"key": "k1", "tenant": "a"}])", "keys.json");
  EXPECT_EQ(a.find("k1"), 0u);
}

TEST(GatewayApiKeys, RefusesBadFilesByName) {
  auto message = [](const std::string& text) {
    try {
      parse_api_keys(text, "f");
    } catch (const nexus::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("").find("no API key"), std::string::npos);
  EXPECT_NE(message("k1 a\nk1 b\n").find("f:2: this key is listed twice"), std::string::npos);
  EXPECT_NE(message("k1 a 5\nk2 a 6\n").find("other limits"), std::string::npos);
  EXPECT_NE(message("k1 a five\n").find("not a number"), std::string::npos);
  EXPECT_NE(message("k1 a 0\n").find("positive"), std::string::npos);
  EXPECT_NE(message("k1 a 1 2 3 4\n").find("expected KEY TENANT"), std::string::npos);
  EXPECT_NE(message("k1 a - - batch\n").find("f:1: max_priority 'batch' is not interactive, default or an integer"),
            std::string::npos);
  EXPECT_NE(message("k1 a - - 1001\n").find("max_priority '1001'"), std::string::npos);
  EXPECT_NE(message("k1 a - - default\nk2 a - - interactive\n").find("other limits"), std::string::npos);
  EXPECT_NE(message(R"([{"key": "k", "tenant": "a", "max_priority": 1001}])").find("max_priority '1001'"),
            std::string::npos);
  EXPECT_NE(message(R"([{"key": "k", "tenant": "a", "max_priority": 1.5}])").find("a string, an integer or null"),
            std::string::npos);
  EXPECT_NE(message(R"([{"key": "k", "tenant": "a", "max_priority": true}])").find("a string, an integer or null"),
            std::string::npos);
  EXPECT_NE(message("k1 bad/name\n").find("tenant"), std::string::npos);
  EXPECT_NE(message(R"({"keys": [{"key": "k", "tenant": "a", "rps": 1}]})").find("unknown field \"rps\""),
            std::string::npos);
  EXPECT_NE(message(R"({"keys": [], "x": 1})").find("unknown field \"x\""), std::string::npos);
  EXPECT_NE(message(R"({"keys": [{"tenant": "a"}]})").find("\"key\""), std::string::npos);
  EXPECT_NE(message(R"({"keys": [{"key": "k", "tenant": "a", "tokens_per_minute": -1}]})").find("positive"),
            std::string::npos);
  EXPECT_NE(message("{not json").find("not valid JSON"), std::string::npos);
}

TEST(GatewayApiKeys, MaxPriorityInBothFormats) {
  const ApiKeyTable lines =
      parse_api_keys("sk-a team-a - - default\nsk-b team-b 5 - 500\nsk-c team-c 5 100 -\nsk-d team-d\n", "keys.txt");
  ASSERT_EQ(lines.tenants.size(), 4u);
  EXPECT_EQ(lines.tenants[0].limits.max_priority, 0);
  EXPECT_FALSE(lines.tenants[0].limits.requests_per_second);
  EXPECT_EQ(lines.tenants[1].limits.max_priority, 500);
  EXPECT_FALSE(lines.tenants[2].limits.max_priority);
  EXPECT_FALSE(lines.tenants[3].limits.max_priority);
  const ApiKeyTable js = parse_api_keys(R"([{"key": "k1", "tenant": "a", "max_priority": "interactive"},
                                            {"key": "k2", "tenant": "b", "max_priority": 0},
                                            {"key": "k3", "tenant": "c", "max_priority": null}])",
                                        "keys.json");
  EXPECT_EQ(js.tenants[0].limits.max_priority, 10);
  EXPECT_EQ(js.tenants[1].limits.max_priority, 0);
  EXPECT_FALSE(js.tenants[2].limits.max_priority);
}

TEST(GatewayApiKeys, PriorityAboveTheTenantsCapIsRefusedInOpenAIsShape) {
  Tenant capped{"team-a", {}};
  capped.limits.max_priority = 0;
  for (const char* body : {R"({"prompt":"x","priority":"interactive"})", R"({"prompt":"x","priority":1})",
                           R"({"messages":[],"priority":1000.0})"}) {
    const auto refusal = priority_refusal(capped, parsed(body));
    ASSERT_TRUE(refusal) << body;
    EXPECT_EQ(refusal->status, 400);
    EXPECT_EQ(refusal->param, "priority");
    EXPECT_EQ(refusal->code, "priority_above_cap");
    EXPECT_NE(refusal->message.find("this API key allows, default (0)"), std::string::npos) << refusal->message;
    const auto j = nlohmann::json::parse(nexus::server::error_body(*refusal));
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  }
  // At or below the cap, absent, or for the replica to refuse (not a class
  // or an integer in range, not JSON): relayed. (Nested past the bound: the
  // gateway's 400 when it parses the body, test_gateway_hostile.cpp.)
  for (const char* body : {R"({"prompt":"x","priority":"default"})", R"({"prompt":"x","priority":-5})",
                           R"({"prompt":"x"})", R"({"prompt":"x","priority":null})",
                           R"({"prompt":"x","priority":"urgent"})", R"({"prompt":"x","priority":5000})",
                           R"({"prompt":"x","priority":1.5})", "{not json", "[1]"})
    EXPECT_FALSE(priority_refusal(capped, parsed(body))) << body;
  EXPECT_FALSE(priority_refusal(Tenant{"ops", {}}, parsed(R"({"prompt":"x","priority":1000})"))) << "no cap";
}

TEST(GatewayApiKeys, BearerParsingAndComparison) {
  using nexus::server::bearer_token;
  EXPECT_EQ(bearer_token("Bearer sk-1"), "sk-1");
  EXPECT_EQ(bearer_token("bearer   sk-1  "), "sk-1");
  EXPECT_FALSE(bearer_token(""));
  EXPECT_FALSE(bearer_token("Bearer "));
  EXPECT_FALSE(bearer_token("Basic dXNlcjpwYXNz"));
  EXPECT_FALSE(bearer_token("Bearersk-1"));
  EXPECT_TRUE(nexus::server::same_key("abc", "abc"));
  EXPECT_FALSE(nexus::server::same_key("abc", "abd"));
  EXPECT_FALSE(nexus::server::same_key("abc", "abcd"));
  EXPECT_FALSE(nexus::server::same_key("", "a"));
  EXPECT_TRUE(nexus::server::open_without_key("GET", "/health"));
  EXPECT_TRUE(nexus::server::open_without_key("GET", "/metrics?x=1"));
  EXPECT_FALSE(nexus::server::open_without_key("POST", "/health"));
  EXPECT_FALSE(nexus::server::open_without_key("GET", "/v1/models"));
}

TEST(GatewayTokenBucket, TakesRefillsAndChargesIntoDebt) {
  const auto t0 = Clock::now();
  TokenBucket b(2, 2, t0);  // 2 a second, holds 2
  EXPECT_TRUE(b.try_take(1, t0));
  EXPECT_TRUE(b.try_take(1, t0));
  EXPECT_FALSE(b.try_take(1, t0));
  EXPECT_DOUBLE_EQ(b.wait_for(1, t0), 0.5);
  EXPECT_TRUE(b.try_take(1, t0 + milliseconds(500)));
  EXPECT_NEAR(b.level(t0 + milliseconds(10'000)), 2, 1e-9);  // never above capacity
  b.charge(5, t0 + milliseconds(10'000));
  EXPECT_NEAR(b.level(t0 + milliseconds(10'000)), -3, 1e-9);
  EXPECT_NEAR(b.wait_for(1, t0 + milliseconds(10'000)), 2.0, 1e-9);
  // An older time point neither refills nor drains.
  EXPECT_NEAR(b.level(t0), -3, 1e-9);
}

TEST(GatewayTenantLimiter, AdmitsByKeyAndLimitsWithRetryAfter) {
  const auto t0 = Clock::now();
  TenantLimiter l(parse_api_keys("ka a 2\nkb b - 60\nkc c\n", "f"), t0);
  EXPECT_EQ(l.admit("", t0).result, AccessResult::Unauthorized);
  EXPECT_FALSE(l.admit("", t0).key_presented);
  const AccessVerdict wrong = l.admit("Bearer nope", t0);
  EXPECT_EQ(wrong.result, AccessResult::Unauthorized);
  EXPECT_TRUE(wrong.key_presented);
  // Requests per second: a bucket of 2.
  EXPECT_EQ(l.admit("Bearer ka", t0).result, AccessResult::Admitted);
  EXPECT_EQ(l.admit("Bearer ka", t0).result, AccessResult::Admitted);
  const AccessVerdict limited = l.admit("Bearer ka", t0);
  EXPECT_EQ(limited.result, AccessResult::RequestsLimited);
  EXPECT_EQ(limited.retry_after_seconds, 1);
  EXPECT_EQ(l.admit("Bearer ka", t0 + milliseconds(600)).result, AccessResult::Admitted);
  // Tokens per minute: 60 a minute; a 100-token answer is a 41 s debt.
  const AccessVerdict b = l.admit("Bearer kb", t0);
  ASSERT_EQ(b.result, AccessResult::Admitted);
  l.charge(b.tenant, TokenUsage{40, 60}, t0);
  const AccessVerdict dry = l.admit("Bearer kb", t0);
  EXPECT_EQ(dry.result, AccessResult::TokensLimited);
  EXPECT_EQ(dry.retry_after_seconds, 41);
  EXPECT_EQ(l.admit("Bearer kb", t0 + milliseconds(41'000)).result, AccessResult::Admitted);
  // No limits: always admitted.
  for (int i = 0; i < 100; ++i) ASSERT_EQ(l.admit("Bearer kc", t0).result, AccessResult::Admitted);
  const auto body = nlohmann::json::parse(rate_limit_body(l.tenants()[0], AccessResult::RequestsLimited, 1));
  EXPECT_EQ(body["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(body["error"]["type"], "requests");
}

TEST(GatewayStreamUsage, AddsIncludeUsageKeepingTheClientsFields) {
  nlohmann::ordered_json doc = parsed(R"({"stream":true,"prompt":"hi","max_tokens":3})");
  const auto r = with_stream_usage(doc);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->client_asked);
  EXPECT_EQ(r->body, R"({"stream":true,"prompt":"hi","max_tokens":3,"stream_options":{"include_usage":true}})");
  nlohmann::ordered_json asked_doc = parsed(R"({"stream":true,"stream_options":{"include_usage":true}})");
  const auto asked = with_stream_usage(asked_doc);
  ASSERT_TRUE(asked);
  EXPECT_TRUE(asked->client_asked);
  for (const char* body : {R"({"stream":false})", R"({"prompt":"x"})", "not json",
                           R"({"stream":true,"stream_options":5})"}) {  // (the last: the replica refuses it)
    nlohmann::ordered_json d = parsed(body);
    EXPECT_FALSE(with_stream_usage(d)) << body;
  }
}

TEST(GatewayStreamUsage, TapReadsAndStripsTheUsageChunkAcrossReads) {
  const std::string stream =
      "data: {\"choices\":[{\"text\":\"a\"}],\"id\":\"x\",\"usage\":null}\n\n"
      "data: {\"choices\":[{\"text\":\"b\"}],\"id\":\"x\",\"usage\":null}\n\n"
      "data: {\"choices\":[],\"id\":\"x\",\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":5,\"total_tokens\":7}}\n\n"
      "data: [DONE]\n\n";
  for (size_t split : {size_t(1), size_t(7), size_t(50), stream.size()}) {
    StreamUsageTap strip(true), keep(false);
    std::string out_strip, out_keep;
    for (size_t i = 0; i < stream.size(); i += split) {
      out_strip += strip.feed(std::string_view(stream).substr(i, split));
      out_keep += keep.feed(std::string_view(stream).substr(i, split));
    }
    out_strip += strip.flush();
    out_keep += keep.flush();
    EXPECT_EQ(out_keep, stream) << "split " << split;
    EXPECT_EQ(out_strip,
              "data: {\"choices\":[{\"text\":\"a\"}],\"id\":\"x\"}\n\n"
              "data: {\"choices\":[{\"text\":\"b\"}],\"id\":\"x\"}\n\n"
              "data: [DONE]\n\n")
        << "split " << split;
    ASSERT_TRUE(strip.usage());
    EXPECT_EQ(strip.usage()->prompt_tokens, 5);
    EXPECT_EQ(strip.usage()->completion_tokens, 2);
    ASSERT_TRUE(keep.usage());
  }
  StreamUsageTap cut(true);
  EXPECT_EQ(cut.feed("data: {\"choices\":[]"), "");  // held until its blank line
  EXPECT_EQ(cut.flush(), "data: {\"choices\":[]");
  EXPECT_FALSE(cut.usage());
  EXPECT_EQ(usage_of_body(R"({"usage":{"prompt_tokens":3,"completion_tokens":4}})")->completion_tokens, 4);
  EXPECT_FALSE(usage_of_body("{}"));
  // The Responses API's and Anthropic's names; Anthropic's cache reads count as prompt tokens.
  const auto responses = usage_of_body(R"({"usage":{"input_tokens":30,"output_tokens":5,"total_tokens":35}})");
  EXPECT_EQ(responses->prompt_tokens, 30);
  EXPECT_EQ(responses->completion_tokens, 5);
  const auto messages = usage_of_body(
      R"({"usage":{"input_tokens":2,"cache_read_input_tokens":16,"cache_creation_input_tokens":0,"output_tokens":7}})");
  EXPECT_EQ(messages->prompt_tokens, 18);
  EXPECT_EQ(messages->completion_tokens, 7);
}

// A replica's event that never ends: at most kMaxEventBytes are held, each
// byte is scanned once (fed a byte at a time, 2 MiB take milliseconds, not
// the minutes of rescanning the held bytes on every read), and then the tap
// is overflowed and passes nothing more.
TEST(GatewayStreamUsage, TapHoldsAnEventUpToItsLimitScanningEachByteOnce) {
  StreamUsageTap tap(true, 64 * 1024);
  const std::string head = "data: {\"choices\":[{\"text\":\"";
  EXPECT_EQ(tap.feed(head), "");
  const std::string x(1, 'x');
  const auto t0 = std::chrono::steady_clock::now();
  size_t fed = 0;
  for (; fed < (2u << 20) && !tap.overflowed(); ++fed) EXPECT_EQ(tap.feed(x), "");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[tap] overflowed after %zu bytes fed a byte at a time, %.3f s\n", fed, s);
  EXPECT_TRUE(tap.overflowed());
  EXPECT_EQ(fed, 64u * 1024 - head.size() + 1);
  EXPECT_EQ(tap.feed("\"}]}\n\n"), "");  // nothing more, even a whole event
  EXPECT_EQ(tap.flush(), "");

  // The blank line split across two reads still ends the event.
  StreamUsageTap split(false);
  EXPECT_EQ(split.feed("data: {\"a\":1}\n"), "");
  EXPECT_EQ(split.feed("\ndata: {\"b\""), "data: {\"a\":1}\n\n");
  EXPECT_EQ(split.feed(":2}\n\n"), "data: {\"b\":2}\n\n");
}

// The agent protocols name their events (an `event:` line before the
// data): the tap reads the usage of a Responses API's final event (in its
// response object) and of Anthropic's message_delta, and relays everything.
TEST(GatewayStreamUsage, ResponsesAndMessagesStreamsAreCountedFromTheirFinalEvents) {
  StreamUsageTap responses(false);
  const std::string created =
      "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n";
  const std::string completed =
      "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\","
      "\"usage\":{\"input_tokens\":12,\"output_tokens\":5,\"total_tokens\":17}},\"sequence_number\":9}\n\n";
  EXPECT_EQ(responses.feed(created), created);
  EXPECT_FALSE(responses.usage());
  EXPECT_EQ(responses.feed(completed), completed);
  ASSERT_TRUE(responses.usage());
  EXPECT_EQ(responses.usage()->prompt_tokens, 12);
  EXPECT_EQ(responses.usage()->completion_tokens, 5);

  StreamUsageTap messages(false);
  const std::string start =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,"
      "\"output_tokens\":1}}}\n\n";
  const std::string delta =
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":3,"
      "\"cache_read_input_tokens\":6,\"output_tokens\":7}}\n\n";
  EXPECT_EQ(messages.feed(start + delta.substr(0, 30)), start);
  EXPECT_EQ(messages.feed(delta.substr(30)), delta);
  ASSERT_TRUE(messages.usage());
  EXPECT_EQ(messages.usage()->prompt_tokens, 9);  // the cache reads are prompt tokens too
  EXPECT_EQ(messages.usage()->completion_tokens, 7);
}

TEST(GatewayStreamUsage, JsonNestedPastTheLimitIsNeitherRewrittenNorCounted) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_FALSE(usage_of_body("{\"usage\":{\"prompt_tokens\":1},\"x\":" + deep + "}"));
  StreamUsageTap tap(false);
  const std::string ev = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1},\"x\":" + deep + "}\n\n";
  EXPECT_EQ(tap.feed(ev), ev);  // relayed as it came, not read
  EXPECT_FALSE(tap.usage());
}
