// The HTTP server's routes, response shapes, streaming and keep-alive, over
// real loopback sockets with a scripted backend (no model needed).
#include <gtest/gtest.h>

#include "support/server_fixture.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class ServerHttp : public ServerFixture {};

// Reads a whole streamed response through next_event(), checking the framing.
std::vector<json> read_stream(HttpClient& c, std::string* text = nullptr, bool chat = false) {
  const HttpResponse h = c.read_header();
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.header("content-type"), "text/event-stream");
  EXPECT_EQ(h.header("cache-control"), "no-cache");
  EXPECT_EQ(h.header("transfer-encoding"), "chunked");
  std::vector<json> chunks;
  bool done = false;
  while (auto ev = c.next_event()) {
    EXPECT_FALSE(done) << "event after [DONE]: " << *ev;
    EXPECT_EQ(ev->rfind("data: ", 0), 0u) << *ev;
    const std::string payload = ev->substr(std::min<size_t>(6, ev->size()));
    if (payload == "[DONE]") { done = true; continue; }
    const json j = json::parse(payload, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << payload;
    if (text && !j["choices"].empty()) {
      const json& ch = j["choices"][0];
      if (chat && ch["delta"].contains("content")) *text += ch["delta"]["content"].get<std::string>();
      if (!chat) *text += ch["text"].get<std::string>();
    }
    chunks.push_back(j);
  }
  EXPECT_TRUE(done) << "stream did not end with [DONE]";
  return chunks;
}

}  // namespace

TEST_F(ServerHttp, Health) {
  auto c = connect();
  const HttpResponse r = c->get("/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(parse(r.body), json({{"status", "ok"}}));
}

TEST_F(ServerHttp, Models) {
  auto c = connect();
  const json j = parse(c->get("/v1/models").body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "fake-model");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_TRUE(j["data"][0]["created"].is_number_integer());
  EXPECT_TRUE(j["data"][0]["owned_by"].is_string());
  // models.retrieve of the OpenAI SDKs.
  const HttpResponse one = c->get("/v1/models/fake-model");
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(parse(one.body), j["data"][0]);
  EXPECT_EQ(expect_error(c->get("/v1/models/gpt-4o"), 404)["code"], "model_not_found");
}

TEST_F(ServerHttp, UnknownPathIs404AndWrongMethodIs405) {
  auto c = connect();
  EXPECT_EQ(expect_error(c->get("/v1/nope"), 404)["type"], "not_found_error");
  const HttpResponse r = c->get("/v1/completions");
  expect_error(r, 405);
  EXPECT_EQ(r.header("allow"), "POST");
  expect_error(c->post("/health", "{}"), 405);
  expect_error(c->request("DELETE", "/v1/models"), 405);
  EXPECT_EQ(c->get("/health?x=1").status, 200);  // still the same connection
}

TEST_F(ServerHttp, CompletionObject) {
  auto c = connect();
  const HttpResponse r = c->post("/v1/completions", R"({"prompt":"hi","max_tokens":3,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  const json j = parse(r.body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_EQ(j["choices"][0]["text"], "t0 t1 t2 ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 3},
                              {"completion_tokens", 3},
                              {"total_tokens", 6},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  EXPECT_EQ(backend->last_max_tokens, 3);
}

TEST_F(ServerHttp, ChatObject) {
  auto c = connect();
  const HttpResponse r = c->post("/v1/chat/completions",
                                 R"({"model":"fake-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = parse(r.body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"], json({{"role", "assistant"}, {"content", "t0 t1 "}}));
  EXPECT_EQ(j["choices"][0]["index"], 0);
  // The plain template was applied: BOS + "User: hi\nAssistant:".
  EXPECT_EQ(backend->last_prompt_tokens, 1 + 19);
}

TEST_F(ServerHttp, StreamedTextEqualsNonStreamedText) {
  auto c = connect();
  for (const bool chat : {false, true}) {
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    const std::string input = chat ? R"("messages":[{"role":"user","content":"x"}])" : R"("prompt":"x")";
    const HttpResponse plain = c->post(path, "{" + input + R"(,"max_tokens":5,"temperature":0})");
    const json pj = parse(plain.body);
    const std::string expected =
        chat ? pj["choices"][0]["message"]["content"].get<std::string>() : pj["choices"][0]["text"].get<std::string>();
    c->send("POST", path, "{" + input + R"(,"max_tokens":5,"temperature":0,"stream":true})");
    std::string streamed;
    const auto chunks = read_stream(*c, &streamed, chat);
    EXPECT_EQ(streamed, expected) << path;
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
    for (const json& ch : chunks) {
      EXPECT_EQ(ch["object"], chat ? "chat.completion.chunk" : "text_completion");
      EXPECT_EQ(ch["id"], chunks[0]["id"]);
    }
  }
}

TEST_F(ServerHttp, ChatStreamShapeWithUsage) {
  auto c = connect();
  c->send("POST", "/v1/chat/completions",
          R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}})");
  const auto chunks = read_stream(*c);
  ASSERT_EQ(chunks.size(), 5u);  // role, t0, t1, finish, usage
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "t0 ");
  EXPECT_EQ(chunks[3]["choices"][0]["delta"], json::object());
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[4]["choices"], json::array());
  EXPECT_EQ(chunks[4]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(chunks[4]["usage"]["total_tokens"], chunks[4]["usage"]["prompt_tokens"].get<int>() + 2);
}

TEST_F(ServerHttp, WholeSseBodyIsWellFramed) {
  auto c = connect();
  const HttpResponse r = c->post("/v1/completions", R"({"prompt":"x","max_tokens":4,"stream":true})");
  ASSERT_EQ(r.status, 200);
  const auto events = split_sse(r.body);
  ASSERT_TRUE(events.has_value()) << r.body;
  ASSERT_EQ(events->size(), 6u);  // 4 tokens, finish, [DONE]
  EXPECT_EQ(events->back(), "[DONE]");
  for (size_t i = 0; i + 1 < events->size(); ++i) EXPECT_FALSE(json::parse((*events)[i]).is_discarded());
}

TEST_F(ServerHttp, HundredStreamedRequestsOverOneConnection) {
  auto c = connect();
  const uint16_t local = c->local_port();
  for (int i = 0; i < 100; ++i) {
    c->send("POST", "/v1/chat/completions",
            R"({"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true})");
    std::string text;
    read_stream(*c, &text, true);
    ASSERT_EQ(text, "t0 t1 t2 ") << "request " << i;
  }
  EXPECT_EQ(c->local_port(), local);
  EXPECT_EQ(server->connections_accepted(), 1u);
  EXPECT_EQ(server->requests_served(), 100u);
}

TEST_F(ServerHttp, MixedRequestsShareTheConnection) {
  auto c = connect();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(c->get("/health").status, 200);
    EXPECT_EQ(c->post("/v1/completions", R"({"prompt":"x","max_tokens":1,"stream":true})").status, 200);
    expect_error(c->post("/v1/completions", R"({"prompt":"x","n":17})"), 400);
    EXPECT_EQ(c->post("/v1/completions", R"({"prompt":"x","max_tokens":1})").status, 200);
  }
  EXPECT_EQ(server->connections_accepted(), 1u);
}

TEST_F(ServerHttp, LogsOneLinePerRequest) {
  auto c = connect();
  c->get("/health");
  c->post("/v1/completions", R"({"prompt":"x","max_tokens":1,"stream":true})");
  c->get("/missing");
  std::lock_guard lock(log_mu);
  ASSERT_EQ(log_lines.size(), 3u);
  EXPECT_EQ(log_lines[0].rfind("GET /health 200 ", 0), 0u) << log_lines[0];
  EXPECT_EQ(log_lines[1].rfind("POST /v1/completions 200 ", 0), 0u) << log_lines[1];
  EXPECT_EQ(log_lines[2].rfind("GET /missing 404 ", 0), 0u) << log_lines[2];
  EXPECT_NE(log_lines[0].find("ms"), std::string::npos);
}

TEST_F(ServerHttp, EngineErrorBecomes500) {
  auto c = connect();
  EXPECT_EQ(expect_error(c->post("/v1/completions", R"({"prompt":"FAIL"})"), 500)["type"], "server_error");
  const HttpResponse s = c->post("/v1/completions", R"({"prompt":"FAIL","stream":true})");
  EXPECT_EQ(s.status, 200);
  const auto ev = split_sse(s.body);
  ASSERT_TRUE(ev && ev->size() == 2) << s.body;
  EXPECT_TRUE(json::parse((*ev)[0]).contains("error"));
  EXPECT_EQ(c->get("/health").status, 200);
}
