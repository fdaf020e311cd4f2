// The Responses API's WebSocket mode (GET /v1/responses with an Upgrade) over
// a real engine (stories260K, greedy): what Codex CLI does on one
// connection -- a generate:false warm-up, a turn continuing it with only the
// new items, a tool round trip -- and what it must never do to the server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/engine_server.h"
#include "support/ws_client.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

constexpr const char* kPreamble =
    "You are a helpful assistant who tells short stories about a little girl named Lily and her dog, who "
    "live in a small house near the park, where they play every day with their friends until the sun goes down.";

class ResponsesWebSocket : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 1024;
    start("stories260K.gguf", eo);
  }
  std::unique_ptr<WsClient> connect() {
    return std::make_unique<WsClient>("127.0.0.1", server_->port(), "/v1/responses");
  }
  // Sends a response.create and reads its events up to the final one.
  static std::vector<json> create(WsClient& ws, json body) {
    body["type"] = "response.create";
    ws.send_json(body);
    std::vector<json> events;
    for (;;) {
      events.push_back(ws.recv_json());
      const std::string type = events.back().value("type", "");
      if (type == "response.completed" || type == "response.incomplete" || type == "response.failed" ||
          type == "error")
        return events;
    }
  }
  static json developer(const std::string& text) {
    return {{"type", "message"}, {"role", "developer"}, {"content", {{{"type", "input_text"}, {"text", text}}}}};
  }
  static json user(const std::string& text) {
    return {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", text}}}}};
  }
};

TEST_F(ResponsesWebSocket, WarmUpThenATurnPrefillsOnlyItsNewItems) {
  auto ws = connect();
  // Codex's warm-up: the preamble only, generate: false.
  const auto warm = create(*ws, {{"input", {developer(kPreamble)}}, {"generate", false}});
  ASSERT_EQ(warm.size(), 2u) << warm.back();
  EXPECT_EQ(warm[0]["type"], "response.created");
  EXPECT_EQ(warm[1]["type"], "response.completed");
  EXPECT_EQ(warm[1]["response"]["output"], json::array());
  const std::string warm_id = warm[1]["response"]["id"];
  ASSERT_FALSE(warm_id.empty());
  const int64_t preamble_tokens = warm[1]["response"]["usage"]["input_tokens"];
  EXPECT_GT(preamble_tokens, 20);

  // The turn: only the new item, continuing the warm-up.
  const auto turn = create(*ws, {{"previous_response_id", warm_id}, {"input", {user("Tell me a story.")}},
                                 {"max_output_tokens", 12}, {"temperature", 0}});
  const json& last = turn.back();
  ASSERT_EQ(last["type"], "response.incomplete") << last;
  for (size_t i = 0; i < turn.size(); ++i) EXPECT_EQ(turn[i]["sequence_number"], i);
  const json usage = last["response"]["usage"];
  // Every token of the warm-up is reused: its prompt stopped before the
  // assistant's turn opened, so it is a prefix of this one.
  EXPECT_GE(usage["input_tokens_details"]["cached_tokens"].get<int64_t>(), preamble_tokens) << usage;
  EXPECT_GT(usage["input_tokens"].get<int64_t>(), preamble_tokens);

  // The same conversation sent whole over HTTP gives the same tokens (greedy).
  const json http = post("/v1/responses", {{"input", {developer(kPreamble), user("Tell me a story.")}},
                                           {"max_output_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(http["output"][0]["content"][0]["text"], last["response"]["output"][0]["content"][0]["text"]);

  // The next turn continues that response, store: false or not (the
  // connection keeps its last response).
  const std::string turn_id = last["response"]["id"];
  const auto next = create(*ws, {{"previous_response_id", turn_id}, {"input", {user("And then?")}},
                                 {"max_output_tokens", 4}, {"store", false}});
  EXPECT_NE(next.back()["type"], "error") << next.back();
  EXPECT_GT(next.back()["response"]["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(),
            usage["input_tokens"].get<int64_t>() - 16);
}

TEST_F(ResponsesWebSocket, AToolRoundTripOnOneConnection) {
  auto ws = connect();
  const json tools = {{{"type", "function"}, {"name", "get_weather"},
                       {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"},
                                                                                       {"maxLength", 8}}}}},
                                       {"required", {"city"}}}}}};
  const auto call = create(*ws, {{"input", "Weather in Paris?"}, {"tools", tools}, {"max_output_tokens", 200},
                                 {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}});
  ASSERT_EQ(call.back()["type"], "response.completed") << call.back();
  const json item = call.back()["response"]["output"][0];
  ASSERT_EQ(item["type"], "function_call");
  bool delta = false;
  for (const json& ev : call) delta |= ev["type"] == "response.function_call_arguments.delta";
  EXPECT_TRUE(delta);
  const auto answer = create(*ws, {{"previous_response_id", call.back()["response"]["id"]}, {"tools", tools},
                                   {"max_output_tokens", 4},
                                   {"input", {{{"type", "function_call_output"}, {"call_id", item["call_id"]},
                                               {"output", "21 C"}}}}});
  EXPECT_NE(answer.back()["type"], "error") << answer.back();
  EXPECT_GT(answer.back()["response"]["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
}

TEST_F(ResponsesWebSocket, BadMessagesGetErrorsAndTheConnectionGoesOn) {
  auto ws = connect();
  // An error refusing a response.create names it ("event"), so a relay
  // pairs each request with its answer; the others name nothing.
  const auto expect_error = [&](const std::string& code, bool refuses_create = false) {
    const json e = ws->recv_json();
    EXPECT_EQ(e["type"], "error") << e;
    EXPECT_EQ(e["status"], 400) << e;
    EXPECT_EQ(e["error"]["code"], code) << e;
    EXPECT_EQ(e.value("event", ""), refuses_create ? "response.create" : "") << e;
  };
  ws->send_text("{not json");
  expect_error("invalid_json");
  ws->send_binary("\x01\x02");
  expect_error("binary_not_supported");
  ws->send_json({{"type", "session.update"}});
  expect_error("invalid_value");
  ws->send_json({{"type", "response.create"}, {"input", "x"}, {"previous_response_id", "resp_nope"}});
  expect_error("previous_response_not_found", true);
  ws->send_json({{"type", "response.cancel"}});
  expect_error("no_response");
  // A large message is parsed off the I/O thread, its type checked there.
  ws->send_json({{"type", "session.update"}, {"pad", std::string(40000, 'x')}});
  expect_error("invalid_value");
  ws->send_json({{"type", "response.create"}, {"input", std::string(40000, 'x')}, {"max_output_tokens", -1}});
  expect_error("invalid_value", true);
  // A second response.create while one runs.
  ws->send_json({{"type", "response.create"}, {"input", "Once upon a time"}, {"max_output_tokens", 200}});
  ws->send_json({{"type", "response.create"}, {"input", "Again"}});
  bool refused = false, ended = false;
  while (!ended) {
    const json ev = ws->recv_json();
    if (ev["type"] == "error") {
      EXPECT_EQ(ev["error"]["code"], "response_in_progress") << ev;
      EXPECT_EQ(ev["event"], "response.create") << ev;
      refused = true;
    }
    ended = ev["type"] == "response.completed" || ev["type"] == "response.incomplete";
  }
  EXPECT_TRUE(refused);
  // A cancel ends the running response with response.failed, code cancelled.
  ws->send_json({{"type", "response.create"}, {"input", "Once upon a time"}, {"max_output_tokens", 400}});
  EXPECT_EQ(ws->recv_json()["type"], "response.created");
  ws->send_json({{"type", "response.cancel"}});
  json last;
  do last = ws->recv_json();
  while (last["type"] != "response.failed" && last["type"] != "response.incomplete");
  if (last["type"] == "response.failed") EXPECT_EQ(last["response"]["error"]["code"], "cancelled") << last;
  // And the connection still answers.
  const auto ok = create(*ws, {{"input", "Hi"}, {"max_output_tokens", 2}});
  EXPECT_EQ(ok.back()["type"], "response.incomplete") << ok.back();
  // A plain GET without the upgrade is the HTTP path's 405.
  HttpClient c("127.0.0.1", server_->port());
  EXPECT_EQ(c.get("/v1/responses").status, 405);
}

}  // namespace
