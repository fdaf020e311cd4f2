// Bad requests over HTTP: each gets the right status and an OpenAI-style
// error body, and the same connection then serves a valid request.
#include <gtest/gtest.h>

#include <ostream>

#include "support/server_fixture.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

struct BadCase {
  const char* name;
  const char* path;
  std::string body;
  int status;
  const char* param;  // nullptr: null
  const char* code;   // nullptr: don't check
};

// GoogleTest prints a parameter in the test list (and CTest copies that into
// every test's name); without this it dumps the struct's bytes, pointers
// included.
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

// FakeBackend's context is 64 tokens.
const BadCase kCases[] = {
    {"MalformedJson", "/v1/completions", R"({"prompt": "x",)", 400, nullptr, "invalid_json"},
    {"BodyNotAnObject", "/v1/completions", R"("prompt")", 400, nullptr, "invalid_json"},
    {"EmptyBody", "/v1/chat/completions", "", 400, nullptr, "invalid_json"},
    {"InvalidUtf8", "/v1/completions", "{\"prompt\":\"caf\xe9\"}", 400, nullptr, "invalid_utf8"},
    {"WrongFieldType", "/v1/completions", R"({"prompt":"x","temperature":"hot"})", 400, "temperature", "invalid_type"},
    {"OutOfRange", "/v1/completions", R"({"prompt":"x","top_p":7})", 400, "top_p", "invalid_value"},
    {"MissingPrompt", "/v1/completions", R"({"max_tokens":3})", 400, "prompt", "missing_required_parameter"},
    {"MissingMessages", "/v1/chat/completions", R"({"model":"fake-model"})", 400, "messages",
     "missing_required_parameter"},
    {"EmptyMessages", "/v1/chat/completions", R"({"messages":[]})", 400, "messages", "empty_array"},
    {"MessageWithoutRole", "/v1/chat/completions", R"({"messages":[{"content":"x"}]})", 400, "messages[0].role",
     nullptr},
    {"UnknownModel", "/v1/chat/completions", R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})", 400,
     "model", "model_not_found"},
    {"MaxTokensZero", "/v1/completions", R"({"prompt":"x","max_tokens":0})", 400, "max_tokens", "invalid_value"},
    {"MaxTokensNegative", "/v1/completions", R"({"prompt":"x","max_tokens":-1})", 400, "max_tokens", "invalid_value"},
    {"MaxTokensHuge", "/v1/completions", R"({"prompt":"x","max_tokens":100000})", 400, "max_tokens", "invalid_value"},
    {"MaxCompletionTokensHuge", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":65})", 400, "max_completion_tokens",
     "invalid_value"},
    {"MaxCompletionTokensNegative", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":-1})", 400, "max_completion_tokens",
     "invalid_value"},
    {"EmptyPromptArray", "/v1/completions", R"({"prompt":[]})", 400, "prompt", "empty_array"},
    {"TopLogprobsWithoutLogprobs", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3})", 400, "top_logprobs", "invalid_value"},
    {"TopLogprobsAbove20", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", 400, "top_logprobs",
     "invalid_value"},
    {"CompletionLogprobsAbove5", "/v1/completions", R"({"prompt":"x","logprobs":6})", 400, "logprobs",
     "invalid_value"},
    {"LogitBiasOutOfVocabulary", "/v1/completions", R"({"prompt":"x","logit_bias":{"999999":1}})", 400,
     "logit_bias", "invalid_value"},
    {"ToolSchemaUnsupported", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}}}]})",
     400, "tools[0].function.parameters", "invalid_value"},
    {"ToolsOnCompletions", "/v1/completions",
     R"({"prompt":"x","tools":[{"type":"function","function":{"name":"f"}}]})", 400, "tools",
     "unsupported_parameter"},
    {"SchemaFeatureUnsupported", "/v1/chat/completions",
     R"x({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"(?=a)"}}}})x",
     400, "response_format.json_schema.schema", "invalid_value"},
    {"BadGrammar", "/v1/completions", R"({"prompt":"x","grammar":"root ::= nowhere"})", 400, "grammar",
     "invalid_value"},
    {"EchoOnChat", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"echo":true})", 400, "echo",
     "unsupported_parameter"},
    {"EchoStreamed", "/v1/completions", R"({"prompt":"x","echo":true,"stream":true})", 400, "echo", "invalid_value"},
    {"BestOfOtherThanN", "/v1/completions", R"({"prompt":"x","best_of":3})", 400, "best_of", "unsupported_value"},
    {"BestOfOtherThanNChat", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":"x"}],"n":2,"best_of":4})", 400, "best_of", "unsupported_value"},
    {"PromptTooLong", "/v1/completions", R"({"prompt":")" + std::string(100, 'a') + R"("})", 400, "prompt",
     "context_length_exceeded"},
    {"ChatTooLong", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":")" + std::string(100, 'a') + R"("}]})", 400, "messages",
     "context_length_exceeded"},
    {"TokenIdOutOfRange", "/v1/completions", R"({"prompt":[1,99999]})", 400, "prompt", "invalid_value"},
    // Outside what the field's type holds: refused by name, never clamped.
    {"SeedTwoToThe64", "/v1/completions", R"({"prompt":"x","seed":18446744073709551616})", 400, "seed",
     "invalid_value"},
    {"SeedTwoToThe63", "/v1/completions", R"({"prompt":"x","seed":9223372036854775808})", 400, "seed",
     "invalid_value"},
    {"SeedHugeFloat", "/v1/completions", R"({"prompt":"x","seed":1e30})", 400, "seed", "invalid_value"},
    {"TopKHugeFloat", "/v1/completions", R"({"prompt":"x","top_k":1e30})", 400, "top_k", "invalid_value"},
    {"TopKPastInt32", "/v1/completions", R"({"prompt":"x","top_k":2147483648})", 400, "top_k", "invalid_value"},
    {"MaxTokensHugeFloat", "/v1/completions", R"({"prompt":"x","max_tokens":1e300})", 400, "max_tokens",
     "invalid_value"},
    {"NAboveTheLimit", "/v1/completions", R"({"prompt":"x","n":17})", 400, "n", "invalid_value"},
    {"NZero", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"n":0})", 400, "n",
     "invalid_value"},
    {"TooManyStops", "/v1/completions", R"({"prompt":"x","stop":["a","b","c","d","e"]})", 400, "stop", nullptr},
    {"StreamNotBool", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", 400,
     "stream", "invalid_type"},
    {"ImageContentPart", "/v1/chat/completions",
     R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})", 400,
     "messages[0].content[0].type", nullptr},
};

class ServerBadInput : public ServerFixture, public ::testing::WithParamInterface<BadCase> {};

}  // namespace

TEST_P(ServerBadInput, RejectedThenNextRequestSucceeds) {
  const BadCase& c = GetParam();
  auto client = connect();
  const json e = expect_error(client->post(c.path, c.body), c.status);
  EXPECT_EQ(e["type"], "invalid_request_error");
  if (c.param) {
    EXPECT_EQ(e["param"], c.param);
  } else {
    EXPECT_TRUE(e["param"].is_null()) << e.dump();
  }
  if (c.code) {
    EXPECT_EQ(e["code"], c.code);
  }
  EXPECT_EQ(backend->started, 0);  // nothing reached the engine

  const HttpResponse ok = client->post(c.path, std::string(c.path).find("chat") != std::string::npos
                                                   ? R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1})"
                                                   : R"({"prompt":"x","max_tokens":1})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(server->connections_accepted(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Cases, ServerBadInput, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

class ServerErrors : public ServerFixture {};

TEST_F(ServerErrors, TenMegabyteBodyGets413AndServerKeepsServing) {
  auto c = connect();
  const std::string big = R"({"prompt":")" + std::string(10u << 20, 'a') + R"("})";
  const HttpResponse r = c->post("/v1/completions", big);
  const json e = expect_error(r, 413);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(c->wait_closed_by_peer());
  EXPECT_EQ(backend->started, 0);
  auto c2 = connect();
  EXPECT_EQ(c2->post("/v1/completions", R"({"prompt":"x","max_tokens":1})").status, 200);
}

TEST_F(ServerErrors, BodyJustUnderTheLimitIsParsed) {
  auto c = connect();
  // ~1 MiB of prompt: accepted by HTTP, then refused for the context length.
  const std::string body = R"({"prompt":")" + std::string((1u << 20) - 32, 'a') + R"("})";
  EXPECT_EQ(expect_error(c->post("/v1/completions", body), 400)["code"], "context_length_exceeded");
}

TEST_F(ServerErrors, QueueFullGives429WithRetryAfter) {
  server.reset();
  backend = std::make_unique<FakeBackend>(64, /*max_queue=*/1);
  start_server();
  backend->hold();
  auto a = connect();
  auto b = connect();
  a->send("POST", "/v1/completions", R"({"prompt":"x","max_tokens":1})");  // queued (worker held)
  ASSERT_TRUE(FakeBackend::wait_for([&] { return backend->queued() == 1; }));
  // The queue holds one: a second request must be refused.
  const HttpResponse r = b->post("/v1/completions", R"({"prompt":"x","max_tokens":1})");
  const json e = expect_error(r, 429);
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_EQ(e["code"], "queue_full");
  backend->release();
  a->read_header();
  EXPECT_EQ(a->finish().status, 200);
  EXPECT_EQ(b->post("/v1/completions", R"({"prompt":"x","max_tokens":1})").status, 200);
}

TEST_F(ServerErrors, MalformedHttpGets400) {
  auto c = connect();
  c->write_raw("BLAH\x01 / HTTP/1.1\r\n\r\n");
  std::string reply = c->read_raw_some();
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  auto c2 = connect();
  EXPECT_EQ(c2->get("/health").status, 200);
}

// RFC 9112 request framing (server/request_framing.h): a request whose body
// length is ambiguous gets its error and the connection closes, so nothing
// it carries is read as a second request (request smuggling).
TEST_F(ServerErrors, AmbiguousFramingIsRefusedAndNothingIsSmuggled) {
  const std::string smuggled = "GET /v1/models/SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n";
  struct Case {
    std::string transfer_encoding;
    std::string extra;  // more header lines
    int status;
    std::string says;
  };
  const Case cases[] = {
      {"xchunked", "", 400, "must end with chunked (it is 'xchunked')"},
      {"identity", "", 400, "must end with chunked"},
      {"gzip", "", 400, "must end with chunked (it is 'gzip')"},
      {"chunked, xchunked", "", 400, "must end with chunked"},
      {"chunked, chunked", "", 400, "chunked more than once"},
      {"gzip, chunked", "", 501, "Transfer-Encoding 'gzip' is not implemented"},
      // Beast's parser refuses this one itself ("bad Content-Length"), before
      // the header check; either way a 400 and the connection closes.
      {"chunked", "Content-Length: 5\r\n", 400, "Content-Length"},
  };
  for (const Case& c : cases) {
    auto conn = connect();
    conn->write_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + c.transfer_encoding +
                    "\r\n" + c.extra + "\r\n" + smuggled);
    std::string reply;
    for (std::string part = conn->read_raw_some(); !part.empty(); part = conn->read_raw_some()) reply += part;
    EXPECT_EQ(reply.rfind("HTTP/1.1 " + std::to_string(c.status), 0), 0u) << c.transfer_encoding << "\n" << reply;
    EXPECT_NE(reply.find(c.says), std::string::npos) << reply;
    EXPECT_NE(reply.find("\"error\""), std::string::npos) << reply;  // the JSON error body
    EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
    // One response only: the smuggled GET was never parsed.
    EXPECT_EQ(reply.find("HTTP/1.1", 1), std::string::npos) << c.transfer_encoding << "\n" << reply;
    EXPECT_EQ(reply.find("SMUGGLED"), std::string::npos) << reply;
  }
  // A plain chunked body is still read.
  auto ok = connect();
  const std::string body = R"({"prompt":"x","max_tokens":1})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  ok->write_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" + std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(ok->read_raw_some().rfind("HTTP/1.1 200", 0), 0u);
}

TEST_F(ServerErrors, Http11WithoutHostGets400) {
  auto c = connect();
  c->write_raw("GET /health HTTP/1.1\r\n\r\n");
  std::string reply;
  for (std::string part = c->read_raw_some(); !part.empty(); part = c->read_raw_some()) reply += part;
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("needs a Host header"), std::string::npos) << reply;
  auto twice = connect();
  twice->write_raw("GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
  EXPECT_NE(twice->read_raw_some().find("more than one Host"), std::string::npos);
  // HTTP/1.0 has no Host requirement.
  auto old = connect();
  old->write_raw("GET /health HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old->read_raw_some().rfind("HTTP/1.1 200", 0), 0u);
}

// Client text quoted in an error message is kept whole, NUL bytes included
// (std::runtime_error::what() would stop at the first), with control
// characters shown as \xNN (issue 26, finding 4).
TEST_F(ServerErrors, ErrorMessagesKeepClientTextPastANulByte) {
  auto c = connect();
  const HttpResponse model = c->post(
      "/v1/chat/completions", R"({"model":"fake-model\u0000evil","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(model.status, 400);
  const std::string m = json::parse(model.body)["error"]["message"];
  EXPECT_NE(m.find(R"(The model 'fake-model\x00evil' does not exist)"), std::string::npos) << m;
  const HttpResponse role =
      c->post("/v1/chat/completions", R"({"messages":[{"role":"us\u0000er\nx","content":"x"}]})");
  EXPECT_EQ(role.status, 400);
  const std::string r = json::parse(role.body)["error"]["message"];
  EXPECT_NE(r.find(R"('us\x00er\x0ax' is not one of)"), std::string::npos) << r;
}
