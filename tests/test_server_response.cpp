// OpenAI response objects and SSE chunks (src/server/openai_response.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_response.h"
#include "support/http_client.h"

using namespace nexus;
using namespace nexus::server;
using nlohmann::json;

namespace {

ResponseMeta meta(Endpoint ep, bool stream, bool usage = false) {
  ResponseMeta m;
  m.endpoint = ep;
  m.stream = stream;
  m.include_usage = usage;
  m.model = "m";
  m.id = make_response_id(ep);
  m.created = 1700000000;
  return m;
}

GenerationEvent piece(const std::string& text) {
  GenerationEvent ev;
  ev.text = text;
  ev.token = 5;
  return ev;
}

GenerationEvent last(FinishReason r, const std::string& text = "") {
  GenerationEvent ev;
  ev.done = true;
  ev.finish = r;
  ev.text = text;
  ev.usage = {3, 4};
  ev.timings.ttft_s = 0.01;
  ev.timings.decode_s = 0.03;
  return ev;
}

// The JSON payloads of an SSE byte string (fails the test on bad framing).
std::vector<std::string> events(const std::string& sse) {
  auto ev = test::split_sse(sse);
  EXPECT_TRUE(ev.has_value()) << sse;
  return ev.value_or(std::vector<std::string>{});
}

}  // namespace

TEST(ServerResponse, IdsHavePrefixesAndDiffer) {
  const std::string a = make_response_id(Endpoint::Completions), b = make_response_id(Endpoint::Completions);
  EXPECT_EQ(a.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(make_response_id(Endpoint::ChatCompletions).rfind("chatcmpl-", 0), 0u);
  EXPECT_NE(a, b);
}

TEST(ServerResponse, CompletionObject) {
  CompletionFormatter f(meta(Endpoint::Completions, false));
  EXPECT_EQ(f.on_event(piece("Once")), "");
  const json j = json::parse(f.on_event(last(FinishReason::Length, " upon")));
  EXPECT_EQ(f.status(), 200);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["text"], "Once upon");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 3},
                              {"completion_tokens", 4},
                              {"total_tokens", 7},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  EXPECT_DOUBLE_EQ(j["timings"]["ttft_ms"].get<double>(), 10.0);
}

TEST(ServerResponse, ChatObject) {
  CompletionFormatter f(meta(Endpoint::ChatCompletions, false));
  f.on_event(piece("Hi"));
  const json j = json::parse(f.on_event(last(FinishReason::Stop)));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"], json({{"role", "assistant"}, {"content", "Hi"}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST(ServerResponse, ChatStreamChunks) {
  CompletionFormatter f(meta(Endpoint::ChatCompletions, true, /*usage=*/true));
  std::string sse = f.stream_preamble() + f.on_event(piece("A")) + f.on_event(piece("")) + f.on_event(piece("B")) +
                    f.on_event(last(FinishReason::Stop));
  const auto ev = events(sse);
  ASSERT_EQ(ev.size(), 6u);  // role, A, B, finish, usage, [DONE]
  const json role = json::parse(ev[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role.contains("usage") && role["usage"].is_null());
  EXPECT_EQ(json::parse(ev[1])["choices"][0]["delta"], json({{"content", "A"}}));
  EXPECT_TRUE(json::parse(ev[1])["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(json::parse(ev[2])["choices"][0]["delta"]["content"], "B");
  const json fin = json::parse(ev[3]);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(fin["choices"][0]["delta"], json::object());
  EXPECT_TRUE(fin.contains("timings"));
  const json usage = json::parse(ev[4]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
  EXPECT_EQ(ev[5], "[DONE]");
  // Every chunk of one stream shares id and created.
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(json::parse(ev[i])["id"], role["id"]);
}

TEST(ServerResponse, CompletionStreamWithoutUsage) {
  CompletionFormatter f(meta(Endpoint::Completions, true));
  EXPECT_EQ(f.stream_preamble(), "");
  const auto ev = events(f.on_event(piece("x")) + f.on_event(last(FinishReason::Length, "y")));
  ASSERT_EQ(ev.size(), 4u);  // x, y, finish, [DONE]
  EXPECT_EQ(json::parse(ev[0])["choices"][0]["text"], "x");
  EXPECT_FALSE(json::parse(ev[0]).contains("usage"));
  EXPECT_EQ(json::parse(ev[1])["choices"][0]["text"], "y");
  EXPECT_EQ(json::parse(ev[2])["choices"][0]["text"], "");
  EXPECT_EQ(json::parse(ev[2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ev[3], "[DONE]");
}

TEST(ServerResponse, EngineErrors) {
  GenerationEvent err = last(FinishReason::Error);
  err.error = "boom";
  CompletionFormatter plain(meta(Endpoint::Completions, false));
  const json j = json::parse(plain.on_event(err));
  EXPECT_EQ(plain.status(), 500);
  EXPECT_EQ(j["error"]["type"], "server_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("boom"), std::string::npos);

  CompletionFormatter streamed(meta(Endpoint::ChatCompletions, true));
  const auto ev = events(streamed.on_event(err));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(json::parse(ev[0]).contains("error"));
  EXPECT_EQ(ev[1], "[DONE]");
}

TEST(ServerResponse, SseSplitRejectsBadFraming) {
  EXPECT_TRUE(test::split_sse("data: 1\n\ndata: [DONE]\n\n").has_value());
  EXPECT_FALSE(test::split_sse("data: 1\n\ndata: 2").has_value());
  EXPECT_FALSE(test::split_sse("event: x\n\n").has_value());
  EXPECT_FALSE(test::split_sse("data: 1\ndata: 2\n\n").has_value());
}
