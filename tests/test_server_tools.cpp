// Tool calling through the HTTP server: a scripted fake backend emitting
// calls (the response shapes, streamed and not, several tokens per event,
// the request errors, tool results sent back), and a real model forced to
// call through the grammar (tool_choice required / named), whose arguments
// must validate against the tool's schema and whose streamed deltas must
// reassemble to the non-streamed tool_calls.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/backend.h"
#include "server/http_server.h"
#include "support/http_client.h"
#include "support/loaded_model.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
   "parameters": {"type": "object",
                  "properties": {"city": {"type": "string", "maxLength": 8},
                                 "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                  "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "The time now",
   "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}])");

json chat_body(json extra = json::object()) {
  json b = {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}}, {"tools", kTools}};
  b.update(extra);
  return b;
}

// The SSE body's chunks folded into {"content", "tool_calls": [{id, type,
// function: {name, arguments}}]}, checking OpenAI's delta shapes; the last
// chunk's finish_reason in *finish.
json fold_stream(const std::string& body, std::string* finish) {
  const auto events = split_sse(body);
  EXPECT_TRUE(events.has_value()) << body;
  json msg = {{"content", nullptr}, {"tool_calls", json::array()}};
  if (!events) return msg;
  for (const std::string& e : *events) {
    if (e == "[DONE]") break;
    const json c = json::parse(e);
    if (c["choices"].empty()) continue;
    const json& choice = c["choices"][0];
    if (!choice["finish_reason"].is_null()) *finish = choice["finish_reason"];
    const json& d = choice["delta"];
    if (d.contains("content") && d["content"].is_string() && !d["content"].get<std::string>().empty())
      msg["content"] = (msg["content"].is_null() ? std::string() : msg["content"].get<std::string>()) +
                       d["content"].get<std::string>();
    if (!d.contains("tool_calls")) continue;
    for (const json& t : d["tool_calls"]) {
      const size_t i = t["index"];
      auto& calls = msg["tool_calls"];
      if (i == calls.size()) {
        EXPECT_TRUE(t.contains("id") && t.contains("type") && t["function"].contains("name")) << t;
        calls.push_back({{"id", t["id"]}, {"type", t["type"]},
                         {"function", {{"name", t["function"]["name"]}, {"arguments", t["function"]["arguments"]}}}});
      } else {
        EXPECT_EQ(t.size(), 2u) << "a later delta carries index and function.arguments only: " << t;
        EXPECT_EQ(t["function"].size(), 1u) << t;
        auto& a = calls[i]["function"]["arguments"];
        a = a.get<std::string>() + t["function"]["arguments"].get<std::string>();
      }
    }
  }
  if (msg["tool_calls"].empty()) msg.erase("tool_calls");
  return msg;
}

// The calls without their ids (random per response).
json without_ids(json calls) {
  for (auto& c : calls) c.erase("id");
  return calls;
}

class ServerTools : public ServerFixture {
 protected:
  ServerTools() {
    backend = std::make_unique<FakeBackend>(8192);
    manual_start_ = true;
  }
  json post_ok(const json& body) {
    const HttpResponse r = connect()->post("/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  std::string prompt_text() const {
    std::string s;
    for (int32_t id : backend->last_request().prompt)
      if (id >= 2) s += static_cast<char>(id - 2);
    return s;
  }
};

// The plain fallback template: the Generic syntax, cut across events at
// arbitrary places, several tokens' text per event.
const std::vector<std::string> kGenericScript = {
    "{\"tool", "_calls\": [{\"name\": \"get_wea", "ther\", \"argu", "ments\": {\"city\": \"Par",
    "is\", \"unit\": \"celsius\"}}, {\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]}"};

TEST_F(ServerTools, GenericCallsParsedStreamedAndNot) {
  backend->script = kGenericScript;
  start_server();
  const json j = post_ok(chat_body());
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& m = choice["message"];
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_TRUE(m["content"].is_null()) << m;
  ASSERT_EQ(m["tool_calls"].size(), 2u) << m;
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}, {"unit", "celsius"}}));
  EXPECT_EQ(m["tool_calls"][1]["function"]["arguments"], "{\"zone\": \"UTC\"}");
  EXPECT_NE(m["tool_calls"][0]["id"], m["tool_calls"][1]["id"]);
  EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  // The model was told about the tools and the format (the plain template renders none).
  EXPECT_NE(prompt_text().find("\"name\":\"get_weather\""), std::string::npos) << prompt_text();
  EXPECT_NE(prompt_text().find("{\"tool_calls\": ["), std::string::npos);

  std::string finish;
  const HttpResponse r = connect()->post("/v1/chat/completions", chat_body({{"stream", true}}).dump());
  ASSERT_EQ(r.status, 200);
  const json streamed = fold_stream(r.body, &finish);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_TRUE(streamed["content"].is_null());
  EXPECT_EQ(without_ids(streamed["tool_calls"]), without_ids(m["tool_calls"]));
}

// A template that knows tools (Hermes/Qwen): content before the call, the
// call between tags, and the role-only first chunk.
TEST_F(ServerTools, HermesTemplateContentThenCall) {
  backend->chat = server::ChatTemplate(
      "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }} {% endfor %}</tools>{% endif %}"
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}"
      "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}{% endif %}"
      "{% endfor %}<|assistant|>",
      "file", "", "");
  backend->script = {"Let me look", " that up.\n<tool", "_call>\n{\"name\": \"get_time\", ", "\"arguments\": {\"zone\"",
                     ": \"CET\"}}\n</tool_call>"};
  start_server();
  const json j = post_ok(chat_body({{"parallel_tool_calls", false}}));
  const json& m = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(m["content"], "Let me look that up.");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"zone\": \"CET\"}");
  EXPECT_NE(prompt_text().find("<tools>get_weather get_time </tools>"), std::string::npos) << prompt_text();

  std::string finish;
  const HttpResponse r = connect()->post("/v1/chat/completions", chat_body({{"stream", true}}).dump());
  const json streamed = fold_stream(r.body, &finish);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(streamed["content"], "Let me look that up.");
  EXPECT_EQ(without_ids(streamed["tool_calls"]), without_ids(m["tool_calls"]));
}

TEST_F(ServerTools, PlainTextStaysContent) {
  backend->script = {"No tools ", "needed: {", "\"a\": 1}"};
  start_server();
  const json j = post_ok(chat_body());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "No tools needed: {\"a\": 1}");
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  // tool_choice none: the output is not parsed and the model is not told.
  backend->script = kGenericScript;
  const json n = post_ok(chat_body({{"tool_choice", "none"}}));
  EXPECT_EQ(n["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(n["choices"][0]["message"]["content"].get<std::string>().rfind("{\"tool_calls\"", 0) == 0);
  EXPECT_EQ(prompt_text().find("get_weather"), std::string::npos);
}

TEST_F(ServerTools, ForcedChoicesGetAGrammar) {
  backend->script = kGenericScript;
  start_server();
  post_ok(chat_body());
  EXPECT_EQ(backend->last_request().grammar, nullptr);  // auto: the model decides
  post_ok(chat_body({{"tool_choice", "required"}}));
  EXPECT_NE(backend->last_request().grammar, nullptr);
  post_ok(chat_body({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}));
  EXPECT_NE(backend->last_request().grammar, nullptr);
}

TEST_F(ServerTools, ToolResultsGoBackToTheModel) {
  backend->script = {"It is sunny."};
  start_server();
  json body = chat_body();
  body["messages"].push_back({{"role", "assistant"}, {"content", nullptr},
                              {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                               {"function", {{"name", "get_weather"},
                                                             {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21 C"}});
  const json j = post_ok(body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "It is sunny.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const std::string p = prompt_text();
  EXPECT_NE(p.find("Assistant: {\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]}"),
            std::string::npos) << p;
  EXPECT_NE(p.find("Tool: sunny, 21 C"), std::string::npos) << p;
}

TEST_F(ServerTools, BadToolsAre400NamingTheField) {
  start_server();
  json bad_schema = kTools;
  bad_schema[1]["function"]["parameters"]["properties"]["zone"] = {{"type", "string"}, {"not", {{"const", "x"}}}};
  const std::vector<std::pair<json, std::string>> cases = {
      {chat_body({{"tools", bad_schema}}), "tools[1].function.parameters"},
      {chat_body({{"tool_choice", "sometimes"}}), "tool_choice"},
      {chat_body({{"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}), "tool_choice"},
      {chat_body({{"functions", json::array({{{"name", "f"}}})}}), "functions"},
  };
  for (const auto& [body, param] : cases) {
    const json e = expect_error(connect()->post("/v1/chat/completions", body.dump()), 400);
    EXPECT_EQ(e["param"], param) << body.dump();
  }
  const json e = expect_error(
      connect()->post("/v1/completions", json({{"prompt", "x"}, {"tools", kTools}}).dump()), 400);
  EXPECT_EQ(e["param"], "tools");
  EXPECT_EQ(e["code"], "unsupported_parameter");
}

// A real model, forced through the grammar: stories260K (a 512-token
// SentencePiece vocabulary, context 2048 so the tools' description fits).
class ModelTools : public ::testing::Test {
 protected:
  void start(server::ChatTemplate tmpl, const std::string& model = "stories260K.gguf") {
    const std::string path = shared_model_path(model);
    if (!require_file(path)) {
      if (HasFailure()) return;
      GTEST_SKIP() << "missing shared file " << path << " (set CI=true to fail instead)";
    }
    m_ = &loaded_model(path);
    EngineOptions eo;
    eo.n_threads = 1;
    engine_ = std::make_unique<Engine>(m_->model, *m_->tok, eo);
    backend_ = std::make_unique<server::EngineBackend>(*engine_, "test-model", std::move(tmpl));
    server::HttpServerOptions o;
    o.port = 0;
    server_ = std::make_unique<server::HttpServer>(*backend_, o);
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  HttpResponse post(const json& body) {
    HttpClient c("127.0.0.1", server_->port());
    return c.post("/v1/chat/completions", body.dump());
  }

  // Forced calls for a few seeds: each call validates against its schema,
  // and the stream reassembles to the same calls.
  // may_run_out: a model whose context is too short to always finish the
  // call (the grammar lets it spend tokens on whitespace): a call cut by
  // max_tokens is checked for its name and the stream only.
  void check_forced(const json& choice, int max_tokens = 400, bool may_run_out = false) {
    for (int seed = 0; seed < 3; ++seed) {
      const json body = chat_body({{"tool_choice", choice}, {"parallel_tool_calls", false}, {"temperature", 1.0},
                                   {"seed", seed}, {"max_tokens", max_tokens}});
      const HttpResponse r = post(body);
      ASSERT_EQ(r.status, 200) << r.body;
      const json j = json::parse(r.body);
      const json& m = j["choices"][0]["message"];
      const bool cut = may_run_out && j["choices"][0]["finish_reason"] == "length";
      if (!cut) ASSERT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << r.body;
      ASSERT_EQ(m["tool_calls"].size(), 1u) << r.body;
      const json& f = m["tool_calls"][0]["function"];
      const json args = json::parse(f["arguments"].get<std::string>(), nullptr, false);
      if (choice.is_object()) {
        EXPECT_EQ(f["name"], choice["function"]["name"]);
      }
      if (cut) {
        // Only the name and the stream can be checked.
      } else if (f["name"] == "get_weather") {
        ASSERT_TRUE(args.is_object() && args.size() == 2) << f;
        ASSERT_TRUE(args["city"].is_string()) << f;
        EXPECT_LE(args["city"].get<std::string>().size(), 8u) << f;  // maxLength counts characters; the model writes ASCII here
        EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << f;
      } else {
        ASSERT_EQ(f["name"], "get_time");
        ASSERT_TRUE(args.is_object() && args.size() == 1) << f;
        EXPECT_TRUE(args["zone"] == "UTC" || args["zone"] == "CET") << f;
      }
      json sbody = body;
      sbody["stream"] = true;
      const HttpResponse s = post(sbody);
      ASSERT_EQ(s.status, 200);
      std::string finish;
      const json streamed = fold_stream(s.body, &finish);
      EXPECT_EQ(finish, j["choices"][0]["finish_reason"]);
      EXPECT_EQ(without_ids(streamed["tool_calls"]), without_ids(m["tool_calls"])) << s.body;
    }
  }

  LoadedModel* m_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::EngineBackend> backend_;
  std::unique_ptr<server::HttpServer> server_;
};

TEST_F(ModelTools, RequiredAndNamedThroughThePlainTemplate) {
  start(server::ChatTemplate());
  if (IsSkipped() || HasFailure()) return;
  check_forced("required");
  check_forced({{"type", "function"}, {"function", {{"name", "get_time"}}}});
}

TEST_F(ModelTools, RequiredThroughAHermesTemplate) {
  start(server::ChatTemplate(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
      "{% if tools %}<tools>{{ tools | tojson }}</tools> Call with <tool_call>{}</tool_call>{% endif %}<|assistant|>",
      "file", "", ""));
  if (IsSkipped() || HasFailure()) return;
  check_forced("required");
}

// A 32000-token vocabulary (TinyLLama-v0), whose tokens span several bytes
// of the syntax ("{\"", "\":", ...): the grammar's masks and the parser's
// cuts meet mid-token. Its context is 128 tokens, so the template names the
// tools without their schemas.
TEST_F(ModelTools, RequiredWithA32kVocabulary) {
  start(server::ChatTemplate("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
                             "{% if tools %} Tools: {{ tools | map(attribute='function') | map(attribute='name') | "
                             "join(', ') }}, called with <tool_call>.{% endif %}<|assistant|>",
                             "file", "", ""),
        "TinyLLama-v0.F32.gguf");
  if (IsSkipped() || HasFailure()) return;
  check_forced({{"type", "function"}, {"function", {{"name", "get_time"}}}}, 90, true);
  check_forced("required", 90, true);
}

}  // namespace
