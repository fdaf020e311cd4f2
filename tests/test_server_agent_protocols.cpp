// The agent protocols over a real engine (stories260K, greedy): OpenAI's
// Responses API and Anthropic's Messages API give the same tokens as chat
// completions for the same conversation; streamed equals non-streamed;
// previous_response_id reuses the KV; bad input is a 4xx in the protocol's
// own error shape and the server goes on.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "server/anthropic/messages_request.h"
#include "server/api_error.h"
#include "server/responses/response_store.h"
#include "server/responses/responses_request.h"
#include "support/engine_server.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

constexpr const char* kPrompt = "Once upon a time there was a little girl named Lily. She loved to play outside.";

class AgentProtocols : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 512;
    start("stories260K.gguf", eo);
  }

  // The `data:` payloads of an SSE body (with their `event:` names, "" when none).
  static std::vector<std::pair<std::string, json>> sse(const std::string& body) {
    std::vector<std::pair<std::string, json>> out;
    std::istringstream in(body);
    std::string line, event;
    while (std::getline(in, line)) {
      if (line.rfind("event: ", 0) == 0) event = line.substr(7);
      if (line.rfind("data: ", 0) != 0) continue;
      const std::string data = line.substr(6);
      if (data != "[DONE]") out.emplace_back(event, json::parse(data));
      event.clear();
    }
    return out;
  }

  // Anthropic's error shape; returns error.type.
  static std::string anthropic_error(const HttpResponse& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.value("type", ""), "error") << r.body;
    EXPECT_TRUE(j.contains("error") && j["error"]["message"].is_string()) << r.body;
    return j.contains("error") ? j["error"].value("type", "") : "";
  }
  // OpenAI's error shape; returns error.param.
  static json openai_error(const HttpResponse& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.contains("error") && j["error"]["message"].is_string()) << r.body;
    return j.contains("error") ? j["error"] : json();
  }
};

TEST_F(AgentProtocols, SameConversationSameTokensThroughEveryProtocol) {
  const json chat = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                                                  {"max_tokens", 16}, {"temperature", 0}});
  const json resp = post("/v1/responses", {{"input", kPrompt}, {"max_output_tokens", 16}, {"temperature", 0}});
  const json msg = post("/v1/messages", {{"model", "test-model"}, {"max_tokens", 16}, {"temperature", 0},
                                         {"messages", {{{"role", "user"}, {"content", kPrompt}}}}});
  const std::string want = chat["choices"][0]["message"]["content"];
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(resp["output"][0]["content"][0]["text"], want);
  EXPECT_EQ(msg["content"][0]["text"], want);
  EXPECT_EQ(resp["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(msg["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(resp["status"], "incomplete");
  EXPECT_EQ(resp["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(msg["stop_reason"], "max_tokens");
}

// Tools under "auto" reach the prompt the same way in every protocol (the
// plain template gets them explained in a system message).
TEST_F(AgentProtocols, ToolsReachThePromptAlikeInEveryProtocol) {
  const json schema = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
  const json user = {{"role", "user"}, {"content", "Weather in Paris?"}};
  const json chat = post("/v1/chat/completions",
                         {{"messages", {user}}, {"max_tokens", 1},
                          {"tools", {{{"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"parameters", schema}}}}}}});
  const json resp = post("/v1/responses", {{"input", "Weather in Paris?"}, {"max_output_tokens", 1},
                                           {"tools", {{{"type", "function"}, {"name", "get_weather"},
                                                       {"parameters", schema}}}}});
  const json count = post("/v1/messages/count_tokens",
                          {{"model", "test-model"}, {"messages", {user}},
                           {"tools", {{{"name", "get_weather"}, {"input_schema", schema}}}}});
  const json bare = post("/v1/chat/completions", {{"messages", {user}}, {"max_tokens", 1}});
  EXPECT_GT(chat["usage"]["prompt_tokens"], bare["usage"]["prompt_tokens"]);
  EXPECT_EQ(resp["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(count["input_tokens"], chat["usage"]["prompt_tokens"]);
}

// Codex sends no max_output_tokens and takes an incomplete response as a
// failed turn: without one, the output may use the rest of the context
// (chat's default of 256 does not apply).
TEST_F(AgentProtocols, ResponsesWithoutMaxOutputTokensUseTheRestOfTheContext) {
  const json r = post("/v1/responses", {{"input", kPrompt}, {"temperature", 0}});
  EXPECT_TRUE(r["max_output_tokens"].is_null());
  const int64_t out = r["usage"]["output_tokens"];
  if (r["status"] == "incomplete") {  // the context's end, not 256
    EXPECT_EQ(out + r["usage"]["input_tokens"].get<int64_t>(), 512) << r["usage"];
  } else {
    EXPECT_EQ(r["status"], "completed");
  }
  EXPECT_NE(out, 256) << r["usage"];
}

TEST_F(AgentProtocols, ResponsesStreamEqualsTheResponseObject) {
  const json req = {{"input", kPrompt}, {"max_output_tokens", 12}, {"temperature", 0}};
  const json whole = post("/v1/responses", req);
  json s = req;
  s["stream"] = true;
  const HttpResponse r = post_raw("/v1/responses", s);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  const auto events = sse(r.body);
  ASSERT_GE(events.size(), 4u);
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].second["sequence_number"], i) << events[i].second;
    if (events[i].second["type"] == "response.output_text.delta") text += events[i].second["delta"];
  }
  EXPECT_EQ(events.front().second["type"], "response.created");
  EXPECT_EQ(events[1].second["type"], "response.in_progress");
  const json& last = events.back().second;
  EXPECT_EQ(last["type"], "response.incomplete");
  EXPECT_EQ(text, whole["output"][0]["content"][0]["text"]);
  EXPECT_EQ(last["response"]["output"], json::array({[&] {
              json item = whole["output"][0];
              item["id"] = last["response"]["output"][0]["id"];
              return item;
            }()}));
  EXPECT_EQ(last["response"]["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
}

TEST_F(AgentProtocols, MessagesStreamEqualsTheMessage) {
  const json req = {{"model", "test-model"}, {"max_tokens", 12}, {"temperature", 0},
                    {"system", json::array({{{"type", "text"}, {"text", "Tell a story."},
                                             {"cache_control", {{"type", "ephemeral"}}}}})},
                    {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", kPrompt}}}}}}}};
  const json whole = post("/v1/messages", req);
  json s = req;
  s["stream"] = true;
  const HttpResponse r = post_raw("/v1/messages", s);
  ASSERT_EQ(r.status, 200);
  const auto events = sse(r.body);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.front().first, "message_start");
  EXPECT_EQ(events.back().first, "message_stop");
  std::string text;
  json delta;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(data["type"], name);  // the event line names the data's type
    if (name == "content_block_delta") text += data["delta"]["text"].get<std::string>();
    if (name == "message_delta") delta = data;
  }
  EXPECT_EQ(text, whole["content"][0]["text"]);
  EXPECT_EQ(delta["delta"]["stop_reason"], whole["stop_reason"]);
  EXPECT_EQ(delta["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
  // count_tokens: the same prompt's size (input_tokens + what was read from the cache).
  json count = req;
  count.erase("max_tokens");
  count.erase("temperature");
  const json n = post("/v1/messages/count_tokens", count);
  EXPECT_EQ(n["input_tokens"].get<int64_t>(), whole["usage"]["input_tokens"].get<int64_t>() +
                                                  whole["usage"]["cache_read_input_tokens"].get<int64_t>());
}

TEST_F(AgentProtocols, PreviousResponseIdContinuesWithTheCachedPrefix) {
  const json first = post("/v1/responses", {{"input", kPrompt}, {"max_output_tokens", 8}, {"temperature", 0}});
  const int64_t first_input = first["usage"]["input_tokens"];
  const json second = post("/v1/responses", {{"input", "What happened next?"},
                                             {"previous_response_id", first["id"]},
                                             {"max_output_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(second["previous_response_id"], first["id"]);
  // The prefix cache keeps whole blocks (16 tokens): at least the first
  // turn's input but its last partial block is reused.
  EXPECT_GE(second["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), first_input - 16);
  EXPECT_GT(second["usage"]["input_tokens"].get<int64_t>(), first_input);
  // The stored response, its input items, and deletion.
  HttpClient c("127.0.0.1", server_->port());
  const HttpResponse got = c.get("/v1/responses/" + first["id"].get<std::string>());
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(json::parse(got.body)["output"], first["output"]);
  const HttpResponse items = c.get("/v1/responses/" + first["id"].get<std::string>() + "/input_items");
  EXPECT_EQ(json::parse(items.body)["data"][0]["content"][0]["text"], kPrompt);
  // A page of a longer input: newest first by default, ids, `after`.
  const json three = post("/v1/responses", {{"max_output_tokens", 1},
                                            {"input", {{{"role", "user"}, {"content", "a"}},
                                                       {{"role", "assistant"}, {"content", "b"}},
                                                       {{"role", "user"}, {"content", "c"}}}}});
  const std::string base = "/v1/responses/" + three["id"].get<std::string>() + "/input_items";
  const json page = json::parse(c.get(base + "?limit=2").body);
  ASSERT_EQ(page["data"].size(), 2u) << page;
  EXPECT_EQ(page["data"][0]["content"], "c");
  EXPECT_TRUE(page["has_more"].get<bool>());
  EXPECT_EQ(page["last_id"], page["data"][1]["id"]);
  const json rest = json::parse(c.get(base + "?limit=2&after=" + page["last_id"].get<std::string>()).body);
  ASSERT_EQ(rest["data"].size(), 1u) << rest;
  EXPECT_EQ(rest["data"][0]["content"], "a");
  EXPECT_FALSE(rest["has_more"].get<bool>());
  EXPECT_EQ(json::parse(c.get(base + "?order=asc").body)["data"][0]["content"], "a");
  EXPECT_EQ(openai_error(c.get(base + "?limit=0"), 400)["param"], "limit");
  EXPECT_EQ(c.request("DELETE", "/v1/responses/" + first["id"].get<std::string>()).status, 200);
  EXPECT_EQ(openai_error(c.get("/v1/responses/" + first["id"].get<std::string>()), 404)["code"], "not_found");
  // store: false keeps nothing.
  const json unstored = post("/v1/responses", {{"input", "Hi"}, {"max_output_tokens", 2}, {"store", false}});
  EXPECT_EQ(c.get("/v1/responses/" + unstored["id"].get<std::string>()).status, 404);
}

TEST_F(AgentProtocols, ForcedToolCallsThroughResponsesAndMessages) {
  const json schema = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}, {"maxLength", 8}}}}},
                       {"required", {"city"}}};
  const json resp = post("/v1/responses", {{"input", "Weather in Paris?"},
                                           {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
                                           {"max_output_tokens", 200}, {"temperature", 0},
                                           {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", schema}},
                                                      {{"type", "web_search"}}}}});
  // A named choice: exactly one call of that tool (not calls repeated until max_output_tokens).
  ASSERT_EQ(resp["output"].size(), 1u) << resp.dump();
  ASSERT_EQ(resp["output"].back()["type"], "function_call") << resp.dump();
  EXPECT_EQ(resp["status"], "completed");
  const json call = resp["output"].back();
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_TRUE(json::parse(call["arguments"].get<std::string>()).contains("city"));
  // Compact, as OpenAI's strict mode writes arguments: no free whitespace.
  EXPECT_EQ(call["arguments"].get<std::string>().rfind("{\"city\":\"", 0), 0u) << call["arguments"];
  EXPECT_EQ(resp["metadata"]["nexus_dropped_tools"], "web_search");  // a hosted tool is left out, and said so
  // The call's output continues the stored response.
  const json next = post("/v1/responses", {{"previous_response_id", resp["id"]}, {"max_output_tokens", 4},
                                           {"input", {{{"type", "function_call_output"}, {"call_id", call["call_id"]},
                                                       {"output", "21 C"}}}}});
  EXPECT_EQ(next["object"], "response");

  const json msg = post("/v1/messages", {{"model", "test-model"}, {"max_tokens", 200}, {"temperature", 0},
                                         {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
                                         {"tools", {{{"name", "get_weather"}, {"input_schema", schema}}}},
                                         {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}}});
  EXPECT_EQ(msg["stop_reason"], "tool_use") << msg.dump();
  EXPECT_EQ(msg["content"].size(), 1u) << msg.dump();
  const json use = msg["content"].back();
  ASSERT_EQ(use["type"], "tool_use");
  EXPECT_TRUE(use["input"].is_object() && use["input"].contains("city"));
  // A forced call cut before its name is known: no text (the call's syntax
  // is no answer), status incomplete / stop_reason max_tokens.
  const json cut = post("/v1/responses", {{"input", "Weather?"}, {"tool_choice", "required"}, {"max_output_tokens", 3},
                                          {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", schema}}}}});
  EXPECT_EQ(cut["status"], "incomplete");
  for (const json& item : cut["output"]) EXPECT_NE(item["type"], "message") << cut["output"];
  const json cut_m = post("/v1/messages", {{"model", "test-model"}, {"max_tokens", 3}, {"tool_choice", {{"type", "any"}}},
                                           {"tools", {{{"name", "get_weather"}, {"input_schema", schema}}}},
                                           {"messages", {{{"role", "user"}, {"content", "Weather?"}}}}});
  EXPECT_EQ(cut_m["stop_reason"], "max_tokens");
  for (const json& block : cut_m["content"]) EXPECT_NE(block["type"], "text") << cut_m["content"];
  const json after = post("/v1/messages",
                          {{"model", "test-model"}, {"max_tokens", 4},
                           {"tools", {{{"name", "get_weather"}, {"input_schema", schema}}}},
                           {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}},
                                         {{"role", "assistant"}, {"content", msg["content"]}},
                                         {{"role", "user"}, {"content", {{{"type", "tool_result"},
                                                                          {"tool_use_id", use["id"]},
                                                                          {"content", "21 C"}}}}}}}});
  EXPECT_EQ(after["type"], "message");
}

TEST_F(AgentProtocols, BadInputIsRefusedInEachProtocolsShapeAndTheServerGoesOn) {
  // Responses: OpenAI's shape, param naming the field.
  EXPECT_EQ(openai_error(post_raw("/v1/responses", {{"input", {{{"type", "reasoning"}, {"summary", json::array()}}}}}),
                         400)["param"], "input[0].type");
  EXPECT_EQ(openai_error(post_raw("/v1/responses", {{"input", {{{"type", "function_call_output"}, {"call_id", "nope"},
                                                                {"output", "x"}}}}}),
                         400)["param"], "input[0].call_id");
  const json unknown = openai_error(post_raw("/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_x"}}), 400);
  EXPECT_EQ(unknown["code"], "previous_response_not_found");
  EXPECT_EQ(openai_error(post_raw("/v1/responses", {{"input", {{{"role", "user"}, {"content",
                                                                  {{{"type", "input_image"}, {"image_url", "x"}}}}}}}}),
                         400)["param"], "input[0].content[0].type");
  EXPECT_EQ(openai_error(post_raw("/v1/responses", {{"input", "x"}, {"bogus", 1}}), 400)["param"], "bogus");
  EXPECT_EQ(openai_error(post_raw("/v1/responses", {{"input", "x"}, {"generate", false}}), 400)["param"], "generate");
  // Messages: Anthropic's shape.
  const json base = {{"model", "test-model"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  EXPECT_EQ(anthropic_error(post_raw("/v1/messages", base), 400), "invalid_request_error");  // max_tokens missing
  json image = base;
  image["max_tokens"] = 4;
  image["messages"][0]["content"] = {{{"type", "image"}, {"source", {{"type", "base64"}}}}};
  const HttpResponse ri = post_raw("/v1/messages", image);
  EXPECT_EQ(anthropic_error(ri, 400), "invalid_request_error");
  EXPECT_NE(ri.body.find("messages[0].content[0]"), std::string::npos) << ri.body;
  json orphan = base;
  orphan["max_tokens"] = 4;
  orphan["messages"][0]["content"] = {{{"type", "tool_result"}, {"tool_use_id", "toolu_x"}, {"content", "1"}}};
  EXPECT_EQ(anthropic_error(post_raw("/v1/messages", orphan), 400), "invalid_request_error");
  json other_model = base;
  other_model["max_tokens"] = 4;
  other_model["model"] = "claude-sonnet-4-5";
  EXPECT_EQ(anthropic_error(post_raw("/v1/messages", other_model), 404), "not_found_error");
  // count_tokens counts a prompt longer than the context (a client asks to learn that).
  json long_prompt = {{"model", "test-model"},
                      {"messages", {{{"role", "user"}, {"content", std::string(4000, 'a') + " end"}}}}};
  const json counted = post("/v1/messages/count_tokens", long_prompt);
  EXPECT_GT(counted["input_tokens"].get<int64_t>(), 512) << counted;
  HttpClient c("127.0.0.1", server_->port());
  EXPECT_EQ(anthropic_error(c.post("/v1/messages", "{not json"), 400), "invalid_request_error");
  EXPECT_EQ(anthropic_error(c.request("GET", "/v1/messages"), 405), "invalid_request_error");
  // A body over the limit: 413 in the path's shape.
  const std::string big(2 << 20, 'a');
  HttpClient c2("127.0.0.1", server_->port());
  EXPECT_EQ(anthropic_error(c2.post("/v1/messages", json{{"model", "m"}, {"max_tokens", 1}, {"system", big}}.dump()), 413),
            "request_too_large");
  HttpClient c3("127.0.0.1", server_->port());
  EXPECT_EQ(openai_error(c3.post("/v1/responses", json{{"input", big}}.dump()), 413)["code"], "request_too_large");
  // And the server goes on.
  EXPECT_EQ(post("/v1/responses", {{"input", "Hi"}, {"max_output_tokens", 2}})["object"], "response");
  EXPECT_EQ(post("/v1/messages", {{"model", "test-model"}, {"max_tokens", 2},
                                  {"messages", {{{"role", "user"}, {"content", "Hi"}}}}})["type"], "message");
}

// --strict-tools: a tool only its vendor runs is a 400 naming it, in both
// protocols; without it the tool is left out and the request goes on.
TEST(StrictTools, HostedAndServerToolsAreRefusedByName) {
  const server::ResponseStore store;
  const std::string responses = json{{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}.dump();
  const std::string messages =
      json{{"model", "m"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}},
           {"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}.dump();
  server::ResponsesParseOptions ro;
  server::MessagesParseOptions mo;
  EXPECT_EQ(server::parse_responses_request(responses, store, ro).dropped_tools, std::vector<std::string>{"web_search"});
  EXPECT_TRUE(server::parse_messages_request(messages, mo).tool_use.tools.empty());
  ro.strict_tools = mo.strict_tools = true;
  const auto code = [](auto&& parse) {
    try {
      parse();
    } catch (const server::ApiError& e) {
      return e.param + " " + e.code;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(code([&] { server::parse_responses_request(responses, store, ro); }), "tools[0].type unsupported_tool");
  EXPECT_EQ(code([&] { server::parse_messages_request(messages, mo); }), "tools[0].type unsupported_tool");
}

TEST(ResponseStore, KeepsTheMostRecentlyUsedWithinItsBudget) {
  server::ResponseStore store(4096);
  const auto entry = [](size_t text_bytes) {
    server::StoredResponse r;
    r.response = {{"id", "x"}};
    r.transcript.push_back({"user", std::string(text_bytes, 'a'), nullptr, "", ""});
    return r;
  };
  store.put("a", entry(1000));
  store.put("b", entry(1000));
  store.put("c", entry(1000));
  ASSERT_NE(store.get("a"), nullptr);  // now the most recent: b goes first
  store.put("d", entry(1000));
  EXPECT_LE(store.bytes(), 4096u);
  EXPECT_NE(store.get("a"), nullptr);
  EXPECT_EQ(store.get("b"), nullptr);
  EXPECT_NE(store.get("d"), nullptr);
  store.put("huge", entry(10000));  // larger than the whole budget: not kept
  EXPECT_EQ(store.get("huge"), nullptr);
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
}

}  // namespace
