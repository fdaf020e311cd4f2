// The adversarial suite, queries of death (issue 42): small bodies, far under
// the 1 MiB limit, whose nesting crashed `nexus serve` (20,000 nested arrays
// in a tool call's arguments, 100,000 in a tool's parameters or a schema,
// 10,000 nested GBNF groups, a realtime session.update), and grammars past
// the matcher's bounds, which passed validation and failed at generation
// with a 500. Each now gets a 400 in OpenAI's error shape naming the limit,
// while a normal stream runs beside it and completes; afterwards the checks
// of probe.h hold (the process is alive and answers within the bound,
// nothing is left running, RSS is back). Also: one Access-Control-Allow-
// Origin and one Vary on a preflight answer, and an absolute-form request
// target served. CTest label `adversarial`.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "adversarial/probe.h"
#include "support/http_client.h"
#include "support/ws_client.h"

using namespace nexus::test;
using namespace nexus::test::adversarial;
using nlohmann::json;

namespace {

// `n` nested arrays around `inner`: a 2n-byte JSON text (raw, never built
// as a json value: that would recurse in the test itself).
std::string nested(int n, const std::string& inner = "1") {
  return std::string(static_cast<size_t>(n), '[') + inner + std::string(static_cast<size_t>(n), ']');
}

std::string post(const std::string& target, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

// One request on a new connection, which is not half-closed (the server
// takes that for a client gone, and cancels a generation); the request asks
// for Connection: close.
std::string roundtrip(uint16_t port, const std::string& request) {
  RawConnection c(port);
  c.send(request);
  return c.read_until_closed();
}

json error_of(const std::string& raw) {
  const json j = json::parse(body_of(raw), nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"] : json();
}

class AdversarialNesting : public ProbeSuite<AdversarialNesting> {
 public:
  static std::vector<std::string> server_flags() { return {"--cors-allow-origin", "http://app.example"}; }

 protected:
  // Sends `body` to `target` while a normal streamed completion runs on
  // another connection; expects a 400 with `code` (and `param` when given)
  // in OpenAI's shape, and the normal stream to finish with [DONE].
  void expect_refused(const std::string& what, const std::string& target, const std::string& body,
                      const std::string& code, const std::string& param = {}) {
    SCOPED_TRACE(what);
    std::string normal_end;
    std::thread normal([&] {
      try {
        HttpClient c("127.0.0.1", server_->port());
        const HttpResponse r = c.post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":24,)"
                                                         R"("stream":true,"temperature":0,"ignore_eos":true})");
        normal_end = r.status == 200 && r.body.find("data: [DONE]") != std::string::npos ? "done" : r.body;
      } catch (const std::exception& e) {
        normal_end = e.what();
      }
    });
    const std::string raw = roundtrip(server_->port(), post(target, body));
    normal.join();
    EXPECT_EQ(status_of(raw), 400) << raw.substr(0, 400);
    const json err = error_of(raw);
    EXPECT_EQ(err.value("type", ""), "invalid_request_error") << raw.substr(0, 400);
    EXPECT_EQ(err.value("code", ""), code) << raw.substr(0, 400);
    if (!param.empty()) EXPECT_EQ(err.value("param", ""), param) << raw.substr(0, 400);
    EXPECT_EQ(normal_end, "done");
  }
};

constexpr int kDeep = 100000;  // 200 KB of brackets
const char* kChat = "/v1/chat/completions";

}  // namespace

TEST_F(AdversarialNesting, DeepJsonInEveryFieldClassIsRefusedWhileParsing) {
  const std::string user = R"({"role":"user","content":"hi"})";
  const std::string tool = R"({"type":"function","function":{"name":"f","parameters":)";
  const struct {
    const char* what;
    const char* target;
    std::string body;
  } cases[] = {
      {"completions prompt", "/v1/completions", R"({"max_tokens":4,"prompt":)" + nested(kDeep) + "}"},
      {"chat content", kChat, R"({"messages":[{"role":"user","content":)" + nested(kDeep) + "}]}"},
      {"tool_calls arguments object", kChat,
       R"({"messages":[)" + user + R"(,{"role":"assistant","tool_calls":[{"id":"c","type":"function",)"
       R"("function":{"name":"f","arguments":{"a":)" + nested(20000) + "}}}]}]}"},
      {"tool_calls extra field", kChat,
       R"({"messages":[)" + user + R"(,{"role":"assistant","tool_calls":[{"id":"c","type":"function","x":)" +
           nested(20000) + R"(,"function":{"name":"f","arguments":"{}"}}]}]})"},
      {"tools parameters, tool_choice none", kChat,
       R"({"tool_choice":"none","messages":[)" + user + R"(],"tools":[)" + tool + R"({"type":"object","x":)" +
           nested(kDeep) + "}}}]}"},
      {"response_format schema", kChat,
       R"({"messages":[)" + user + R"(],"response_format":{"type":"json_schema","json_schema":{"name":"s",)"
       R"("schema":{"type":"object","x":)" + nested(kDeep) + "}}}}"},
      {"stop", "/v1/completions", R"({"prompt":"a","stop":)" + nested(kDeep, "\"x\"") + "}"},
      {"unknown extra field", "/v1/completions", R"({"prompt":"a","max_tokens":2,"extra":)" + nested(kDeep) + "}"},
      {"embeddings input", "/v1/embeddings", R"({"input":)" + nested(kDeep) + "}"},
      {"tokenize content", "/tokenize", R"({"content":)" + nested(kDeep) + "}"},
  };
  for (const auto& c : cases) expect_refused(c.what, c.target, c.body, "nesting_too_deep");
  // The limit itself: 127 levels inside the body's object pass the parser.
  const std::string at_limit = R"({"prompt":"a","max_tokens":2,"extra":)" + nested(126) + "}";
  const std::string raw = roundtrip(server_->port(), post("/v1/completions", at_limit));
  EXPECT_EQ(status_of(raw), 200) << raw.substr(0, 400);
}

TEST_F(AdversarialNesting, DeepGbnfIsRefused) {
  const std::string groups = "root ::= " + std::string(10000, '(') + "\\\"x\\\"" + std::string(10000, ')');
  expect_refused("10,000 nested groups", "/v1/completions",
                 R"({"prompt":"a","max_tokens":4,"grammar":")" + groups + "\"}", "invalid_value", "grammar");
  std::string chain = "root ::= r0\\n";
  for (int i = 0; i < 5000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \\\"x\\\"\\n";
  chain += "r5000 ::= \\\"y\\\"";
  expect_refused("a chain of 5,000 leading references", "/v1/completions",
                 R"({"prompt":"a","max_tokens":4,"grammar":")" + chain + "\"}", "invalid_value", "grammar");
}

TEST_F(AdversarialNesting, GrammarsPastTheMatchersBoundsAre400NotA500AtGeneration) {
  std::string alts = "root ::= \\\"x\\\"";
  for (int i = 1; i < 5000; ++i) alts += " | \\\"x\\\"";
  expect_refused("5,000 alternatives", "/v1/completions",
                 R"({"prompt":"a","max_tokens":4,"grammar":")" + alts + "\"}", "grammar_too_complex", "grammar");
  json names = json::array();
  for (int i = 0; i < 5000; ++i) names.push_back("name_" + std::to_string(i));
  const json body = {{"messages", {{{"role", "user"}, {"content", "pick"}}}},
                     {"max_tokens", 8},
                     {"response_format",
                      {{"type", "json_schema"}, {"json_schema", {{"name", "e"}, {"schema", {{"enum", names}}}}}}}};
  expect_refused("an enum of 5,000 strings", kChat, body.dump(), "grammar_too_complex", "response_format");
  json tool_enum = {{"type", "function"},
                    {"function",
                     {{"name", "pick"},
                      {"parameters",
                       {{"type", "object"}, {"properties", {{"name", {{"enum", names}}}}}, {"required", {"name"}}}}}}};
  const json forced = {{"messages", {{{"role", "user"}, {"content", "pick"}}}},
                       {"max_tokens", 8},
                       {"tools", {tool_enum}},
                       {"tool_choice", "required"}};
  expect_refused("a forced tool whose parameter is an enum of 5,000 strings", kChat, forced.dump(),
                 "grammar_too_complex", "tools");
}

TEST_F(AdversarialNesting, RealtimeSessionUpdateTooDeepIsAnErrorEventAndTheSessionGoesOn) {
  WsClient ws("127.0.0.1", server_->port());
  ws.recv_until("session.created");
  for (const char* setting : {"stop", "temperature"}) {
    ws.send_text(std::string(R"({"type":"session.update","session":{")") + setting + "\":" + nested(kDeep) + "}}");
    const json ev = ws.recv_json();
    EXPECT_EQ(ev.value("type", ""), "error") << ev.dump().substr(0, 300);
    EXPECT_EQ(ev["error"].value("code", ""), "nesting_too_deep") << ev.dump().substr(0, 300);
  }
  ws.send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
  ws.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 4}}}});
  const json done = ws.recv_until("response.done");
  EXPECT_NE(done["response"].value("finish_reason", ""), "error") << done.dump();
  ws.close();
}

TEST_F(AdversarialNesting, PreflightCarriesEachCorsFieldOnce) {
  const std::string raw = roundtrip(server_->port(),
      "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://app.example\r\n"
      "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(raw), 204) << raw;
  const std::string head = raw.substr(0, raw.find("\r\n\r\n"));
  const auto count = [&](const std::string& name) {
    size_t n = 0;
    for (size_t at = head.find("\r\n" + name + ":"); at != std::string::npos; at = head.find("\r\n" + name + ":", at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("Access-Control-Allow-Origin"), 1u) << head;
  EXPECT_EQ(count("Vary"), 1u) << head;
  EXPECT_EQ(count("Access-Control-Allow-Methods"), 1u) << head;
}

TEST_F(AdversarialNesting, AbsoluteFormTargetsAreServed) {
  const std::string body = R"({"prompt":"Once","max_tokens":2})";
  const std::string raw = roundtrip(server_->port(), post("http://127.0.0.1:" + std::to_string(server_->port()) +
                                                     "/v1/completions", body));
  EXPECT_EQ(status_of(raw), 200) << raw.substr(0, 400);
  const std::string health = roundtrip(server_->port(), "GET HTTP://other.example/health?x=1 HTTP/1.1\r\nHost: x\r\n"
                                                "Connection: close\r\n\r\n");
  EXPECT_EQ(status_of(health), 200) << health;
}
