// Request parsing/validation and prompt building for the OpenAI endpoints
// (src/server/openai_request.h, prompt_builder.h), without a network.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/prompt_builder.h"
#include "server/request_priority.h"
#include "support/fake_backend.h"

using namespace nexus;
using namespace nexus::server;
using nlohmann::json;

namespace {

// The ApiError thrown by parsing `body`, or a failure if none is.
ApiError parse_error(Endpoint ep, const std::string& body) {
  try {
    parse_openai_request(ep, body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

ApiError build_error(const std::string& body, test::FakeBackend& b, Endpoint ep = Endpoint::Completions) {
  const ConversationRequest r = parse_openai_request(ep, body);
  try {
    build_generation(r, b);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

}  // namespace

TEST(ServerRequest, CompletionFieldsAreRead) {
  const ConversationRequest r = parse_openai_request(Endpoint::Completions, R"({
    "model":"m","prompt":"hello","max_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,"min_p":0.1,
    "frequency_penalty":0.5,"presence_penalty":-0.5,"repeat_penalty":1.1,"seed":-1,
    "stop":["a","","b"],"stream":true,"stream_options":{"include_usage":true},"n":1,"ignore_eos":true,
    "unknown_field":{"x":1}})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "hello");
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.1f);
  ASSERT_TRUE(r.sampling.seed.has_value());
  EXPECT_EQ(*r.sampling.seed, UINT64_MAX);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(ServerRequest, DefaultsFollowOpenAI) {
  const ConversationRequest r = parse_openai_request(Endpoint::Completions, R"({"prompt":"x","temperature":null})");
  EXPECT_EQ(r.model, "");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
}

TEST(ServerRequest, PromptForms) {
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":["one"]})").prompt, "one");
  const ConversationRequest ids = parse_openai_request(Endpoint::Completions, R"({"prompt":[1,2,3]})");
  EXPECT_TRUE(ids.prompt_is_tokens);
  EXPECT_EQ(ids.prompt_tokens, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":[[4,5]]})").prompt_tokens,
            (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":["a","b"]})").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":[]})").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":[1,"a"]})").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":5})").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"model":"x"})").code, "missing_required_parameter");
}

TEST(ServerRequest, UnsupportedFieldsAreRefusedOnlyWhenTheyAskForSomething) {
  // What SDKs send by default (false, null, empty, text, 1) passes.
  EXPECT_NO_THROW(parse_openai_request(Endpoint::ChatCompletions,
                                    R"({"messages":[{"role":"user","content":"x"}],"logprobs":false,"top_logprobs":0,
                                        "tools":[],"response_format":{"type":"text"},"functions":null,"logit_bias":{}})"));
  EXPECT_NO_THROW(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","logprobs":null,"echo":false,
                                                              "best_of":1,"suffix":""})"));
  for (const char* body : {R"({"prompt":"x","suffix":"end"})"})
    EXPECT_EQ(parse_error(Endpoint::Completions, body).code, "unsupported_parameter") << body;
  for (const char* body : {R"({"prompt":"x","best_of":2})", R"({"prompt":"x","n":4,"best_of":3})"})
    EXPECT_EQ(parse_error(Endpoint::Completions, body).param, "best_of") << body;
}

TEST(ServerRequest, LogprobsAndLogitBias) {
  const char* chat = R"({"messages":[{"role":"user","content":"x"}],)";
  auto chat_req = [&](const std::string& rest) { return parse_openai_request(Endpoint::ChatCompletions, chat + rest); };
  EXPECT_EQ(chat_req(R"("logprobs":true})").sampling.logprobs, 0);
  EXPECT_EQ(chat_req(R"("logprobs":true,"top_logprobs":20})").sampling.logprobs, 20);
  EXPECT_EQ(chat_req(R"("logprobs":false})").sampling.logprobs, -1);
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","logprobs":5})").sampling.logprobs, 5);
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x"})").sampling.logprobs, -1);

  for (const char* rest : {R"("logprobs":true,"top_logprobs":21})", R"("logprobs":true,"top_logprobs":-1})",
                           R"("top_logprobs":3})"})
    EXPECT_EQ(parse_error(Endpoint::ChatCompletions, chat + std::string(rest)).param, "top_logprobs") << rest;
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, chat + std::string(R"("logprobs":3})")).param, "logprobs");
  for (const char* body : {R"({"prompt":"x","logprobs":6})", R"({"prompt":"x","logprobs":-1})",
                           R"({"prompt":"x","logprobs":true})", R"({"prompt":"x","logprobs":1e30})"})
    EXPECT_EQ(parse_error(Endpoint::Completions, body).param, "logprobs") << body;
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","top_logprobs":2})").param, "top_logprobs");

  const ConversationRequest b = parse_openai_request(Endpoint::Completions, R"({"prompt":"x","logit_bias":{"339":-100,"7":2.5}})");
  ASSERT_EQ(b.logit_bias.size(), 2u);
  EXPECT_EQ(b.logit_bias[0], (std::pair<int64_t, float>{339, -100.0f}));
  EXPECT_EQ(b.logit_bias[1], (std::pair<int64_t, float>{7, 2.5f}));
  for (const char* body : {R"({"prompt":"x","logit_bias":{"a":1}})", R"({"prompt":"x","logit_bias":{"-1":1}})",
                           R"({"prompt":"x","logit_bias":{"5":101}})", R"({"prompt":"x","logit_bias":{"5":"1"}})",
                           R"({"prompt":"x","logit_bias":[1]})", R"({"prompt":"x","logit_bias":{"99999999999999999999":1}})"})
    EXPECT_EQ(parse_error(Endpoint::Completions, body).param, "logit_bias") << body;
}

TEST(ServerRequest, ChatMessages) {
  const ConversationRequest r = parse_openai_request(Endpoint::ChatCompletions, R"({"messages":[
      {"role":"developer","content":"be nice"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null}],
      "max_tokens":3,"max_completion_tokens":9})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 9);  // max_completion_tokens wins

  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, R"({})").param, "messages");
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, R"({"messages":[]})").code, "empty_array");
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, R"({"messages":"hi"})").param, "messages");
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, R"({"messages":[{"role":"wizard","content":"x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, R"({"messages":[{"content":"x"}]})").param, "messages[0].role");
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, R"({"messages":[{"role":"user"}]})").param,
            "messages[0].content");
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions,
                        R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})")
                .param,
            "messages[0].content[0].type");
}

TEST(ServerRequest, TypeAndRangeErrorsNameTheField) {
  struct Case { const char* body; const char* param; };
  const Case cases[] = {
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","temperature":2.5})", "temperature"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","top_k":-1})", "top_k"},
      {R"({"prompt":"x","top_k":1.5})", "top_k"},
      {R"({"prompt":"x","min_p":-0.1})", "min_p"},
      {R"({"prompt":"x","presence_penalty":3})", "presence_penalty"},
      {R"({"prompt":"x","frequency_penalty":"a"})", "frequency_penalty"},
      {R"({"prompt":"x","repeat_penalty":0})", "repeat_penalty"},
      {R"({"prompt":"x","max_tokens":"ten"})", "max_tokens"},
      {R"({"prompt":"x","stream":"yes"})", "stream"},
      {R"({"prompt":"x","n":17})", "n"},
      {R"({"prompt":"x","n":0})", "n"},
      {R"({"prompt":"x","n":1.5})", "n"},
      {R"({"prompt":"x","stop":["a","b","c","d","e"]})", "stop"},
      {R"({"prompt":"x","stop":[1]})", "stop"},
      {R"({"prompt":"x","model":7})", "model"},
      {R"({"prompt":"x","seed":"s"})", "seed"},
      {R"({"prompt":"x","ignore_eos":1})", "ignore_eos"},
      {R"({"prompt":"x","stream_options":true})", "stream_options"},
  };
  for (const Case& c : cases) {
    const ApiError e = parse_error(Endpoint::Completions, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
  }
  // repeat_penalty: one message for both ends of its range.
  for (const char* body : {R"({"prompt":"x","repeat_penalty":0})", R"({"prompt":"x","repeat_penalty":2e9})",
                           R"({"prompt":"x","repeat_penalty":-1})"})
    EXPECT_NE(std::string(parse_error(Endpoint::Completions, body).what()).find("expected a value in (0, 1e9]"),
              std::string::npos)
        << body;
}

// Every wrong priority (unknown name, other JSON types, out of range) says
// what is allowed: the names and integers.
TEST(ServerRequest, PriorityErrorsListTheAllowedValues) {
  for (const char* body : {R"({"prompt":"x","priority":"urgent"})", R"({"prompt":"x","priority":true})",
                           R"({"prompt":"x","priority":[1]})", R"({"prompt":"x","priority":1.5})"}) {
    const ApiError e = parse_error(Endpoint::Completions, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "priority") << body;
    EXPECT_NE(std::string(e.what()).find("\"interactive\""), std::string::npos) << body << ": " << e.what();
  }
}

// Priority is a privilege (issue 42): a request may ask for at most the
// server's cap (--max-request-priority, default interactive); above it a
// 400 priority_above_cap that names the cap.
TEST(ServerRequest, PriorityAboveTheServersCapIsRefusedNamingTheCap) {
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","priority":"interactive"})").priority, 10);
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","priority":10})").priority, 10);
  for (const char* body : {R"({"prompt":"x","priority":11})", R"({"prompt":"x","priority":1000})"}) {
    const ApiError e = parse_error(Endpoint::Completions, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.type, "invalid_request_error") << body;
    EXPECT_EQ(e.param, "priority") << body;
    EXPECT_EQ(e.code, "priority_above_cap") << body;
    EXPECT_NE(e.message.find("this server allows, interactive (10)"), std::string::npos) << e.message;
  }
  // Another cap; a priority out of range stays invalid_value whatever the cap.
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","priority":1000})", 1000).priority, 1000);
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x"})", 0).priority, 0);
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","priority":"batch"})", 0).priority, -10);
  try {
    parse_openai_request(Endpoint::ChatCompletions,
                      R"({"messages":[{"role":"user","content":"x"}],"priority":"interactive"})", 0);
    ADD_FAILURE() << "interactive accepted under cap 0";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "priority_above_cap");
    EXPECT_EQ(e.message, "Invalid 'priority': interactive (10) is above the highest priority this server allows, "
                         "default (0).");
  }
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","priority":1001})").code, "invalid_value");
}

TEST(ServerRequest, PriorityCapsAndValues) {
  EXPECT_EQ(parse_priority_cap("interactive"), 10);
  EXPECT_EQ(parse_priority_cap("default"), 0);
  EXPECT_EQ(parse_priority_cap("1000"), 1000);
  EXPECT_EQ(parse_priority_cap("0"), 0);
  // Below default a request without a priority would be refused; and no
  // text but a class or an integer.
  for (const char* bad : {"batch", "-1", "1001", "10x", "", " 10", "+10", "1e3", "Interactive"})
    EXPECT_FALSE(parse_priority_cap(bad)) << bad;
  EXPECT_EQ(priority_value(json("batch")), -10);
  EXPECT_EQ(priority_value(json(-1000)), -1000);
  EXPECT_EQ(priority_value(json(3.0)), 3);
  for (const json& bad : {json("urgent"), json(1.5), json(1001), json(true), json::array({1}), json(nullptr)})
    EXPECT_FALSE(priority_value(bad)) << bad;
  EXPECT_EQ(priority_name(10), "interactive (10)");
  EXPECT_EQ(priority_name(-10), "batch (-10)");
  EXPECT_EQ(priority_name(500), "500");
}

TEST(ServerRequest, MalformedBodies) {
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":)").code, "invalid_json");
  EXPECT_EQ(parse_error(Endpoint::Completions, "").code, "invalid_json");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"(["prompt"])").code, "invalid_json");
  EXPECT_EQ(parse_error(Endpoint::Completions, "{\"prompt\":\"\xff\xfe\"}").code, "invalid_utf8");
  // An overlong encoding of '/' and a UTF-16 surrogate are not UTF-8 either.
  EXPECT_EQ(parse_error(Endpoint::Completions, "{\"prompt\":\"\xc0\xaf\"}").code, "invalid_utf8");
  EXPECT_EQ(parse_error(Endpoint::Completions, "{\"prompt\":\"\xed\xa0\x80\"}").code, "invalid_utf8");
}

TEST(ServerRequest, Utf8Validator) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_FALSE(is_valid_utf8("\xc3"));                  // truncated
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\x80"));                  // lone continuation
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));      // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe0\x80\x80"));          // overlong
}

TEST(ServerPromptBuilder, ModelAndMaxTokensChecks) {
  test::FakeBackend b(/*n_ctx=*/64);
  EXPECT_EQ(build_error(R"({"prompt":"x","model":"gpt-4"})", b).code, "model_not_found");
  EXPECT_EQ(build_error(R"({"prompt":"x","model":"gpt-4"})", b).param, "model");
  EXPECT_EQ(build_error(R"({"prompt":"x","max_tokens":0})", b).param, "max_tokens");
  EXPECT_EQ(build_error(R"({"prompt":"x","max_tokens":-5})", b).param, "max_tokens");
  const ApiError huge = build_error(R"({"prompt":"x","max_tokens":1000000000000})", b);
  EXPECT_EQ(huge.param, "max_tokens");
  EXPECT_NE(std::string(huge.what()).find("64"), std::string::npos) << huge.what();  // names the limit
  // Beyond int64 (1e30, -1e30, 2^64 - 1 as an unsigned integer): refused as it is parsed, naming the
  // field and the value sent, never a saturated number the client did not send.
  for (const char* body : {R"({"prompt":"x","max_tokens":1e30})", R"({"prompt":"x","max_tokens":-1e30})",
                           R"({"prompt":"x","max_tokens":18446744073709551615})"}) {
    try {
      parse_openai_request(Endpoint::Completions, body);
      ADD_FAILURE() << "parsed " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, "max_tokens");
      EXPECT_NE(e.message.find("is outside the range of a 64-bit integer"), std::string::npos) << e.message;
      EXPECT_EQ(e.message.find("9223372036854775807"), std::string::npos) << e.message;
    }
  }

  // Served id, or no model at all, is fine.
  EXPECT_NO_THROW(build_generation(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","model":"fake-model"})"), b));
}

TEST(ServerPromptBuilder, ContextLength) {
  test::FakeBackend b(/*n_ctx=*/16);
  // BOS + 15 bytes = 16 tokens: no room for a completion.
  const ApiError e = build_error(R"({"prompt":"123456789012345"})", b);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(build_error(R"({"messages":[{"role":"user","content":"a long message"}]})", b,
                        Endpoint::ChatCompletions).code,
            "context_length_exceeded");
  // 15 tokens fit; max_tokens is clamped to the room left (1).
  GenerationRequest g = build_generation(parse_openai_request(Endpoint::Completions, R"({"prompt":"12345678901234"})"), b);
  EXPECT_EQ(g.prompt.size(), 15u);
  EXPECT_EQ(g.stop.max_tokens, 1);
}

TEST(ServerPromptBuilder, BuildsTheGenerationRequest) {
  test::FakeBackend b(/*n_ctx=*/512);
  GenerationRequest g = build_generation(parse_openai_request(Endpoint::Completions,
      R"({"prompt":"ab","temperature":0,"stop":"x","ignore_eos":true,"seed":3})"), b);
  EXPECT_EQ(g.prompt, (std::vector<int32_t>{1, 'a' + 2, 'b' + 2}));
  EXPECT_EQ(g.stop.max_tokens, kDefaultMaxTokens);
  EXPECT_EQ(g.stop.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(g.stop.ignore_eos);
  EXPECT_EQ(g.sampling.temperature, 0.0f);
  EXPECT_EQ(g.sampling.seed, 3u);

  g = build_generation(parse_openai_request(Endpoint::Completions, R"({"prompt":[5,6],"max_tokens":4})"), b);
  EXPECT_EQ(g.prompt, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(g.stop.max_tokens, 4);
  EXPECT_EQ(build_error(R"({"prompt":[5,258]})", b).param, "prompt");
  EXPECT_EQ(build_error(R"({"prompt":[-1]})", b).param, "prompt");

  // Chat: the plain fallback template, tokenized.
  g = build_generation(parse_openai_request(Endpoint::ChatCompletions, R"({"messages":[{"role":"user","content":"hi"}]})"),
                       b);
  EXPECT_EQ(g.prompt, b.tokenize("User: hi\nAssistant:", false));
}

TEST(ServerApiError, JsonShape) {
  const json j = json::parse(error_body(bad_request("bad \xff thing", "temperature", "invalid_value")));
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  EXPECT_TRUE(j["error"]["message"].is_string());
  const json k = json::parse(error_body(ApiError(404, "nope")));
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
}

TEST(ServerRequest, ResponseFormatAndGrammar) {
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x"})").grammar, nullptr);
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","response_format":{"type":"text"}})").grammar,
            nullptr);
  EXPECT_NE(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","response_format":{"type":"json_object"}})").grammar,
            nullptr);
  EXPECT_NE(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","grammar":"root ::= \"yes\" | \"no\""})").grammar,
            nullptr);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","response_format":"json"})").param, "response_format");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","response_format":{}})").param, "response_format.type");
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","response_format":{"type":"yaml"}})").param,
            "response_format.type");
  const auto bad = parse_error(Endpoint::Completions, R"({"prompt":"x","grammar":"root ::= undefined-rule"})");
  EXPECT_EQ(bad.param, "grammar");
  EXPECT_NE(bad.message.find("undefined-rule"), std::string::npos) << bad.message;
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","grammar":5})").param, "grammar");
  EXPECT_NE(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","response_format":{"type":"json_schema",
      "json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}},
      "required":["a"],"additionalProperties":false}}}})").grammar, nullptr);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","response_format":{"type":"json_schema"}})").param,
            "response_format.json_schema");
  const auto unsupported = parse_error(Endpoint::Completions, R"x({"prompt":"x","response_format":{"type":"json_schema",
      "json_schema":{"schema":{"type":"string","pattern":"(?=a)"}}}})x");
  EXPECT_EQ(unsupported.param, "response_format.json_schema.schema");
  EXPECT_NE(unsupported.message.find("'pattern'"), std::string::npos) << unsupported.message;
  EXPECT_EQ(parse_error(Endpoint::Completions,
                        R"({"prompt":"x","grammar":"root ::= \"a\"","response_format":{"type":"json_object"}})")
                .param,
            "grammar");
}

TEST(ServerRequest, NChoicesAndBestOfEqualToN) {
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x"})").n, 1);
  EXPECT_EQ(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","n":16,"best_of":16})").n, 16);
  EXPECT_EQ(parse_openai_request(Endpoint::ChatCompletions, R"({"messages":[{"role":"user","content":"x"}],"n":3})").n, 3);
  const ApiError e = parse_error(Endpoint::Completions, R"({"prompt":"x","n":17})");
  EXPECT_EQ(e.param, "n");
  EXPECT_NE(std::string(e.what()).find("from 1 to 16"), std::string::npos) << e.what();
}

TEST(ServerRequest, EchoIsACompletionsFieldWithoutStream) {
  EXPECT_TRUE(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","echo":true,"max_tokens":0})").echo);
  EXPECT_FALSE(parse_openai_request(Endpoint::Completions, R"({"prompt":"x","echo":false,"stream":true})").echo);
  EXPECT_EQ(parse_error(Endpoint::Completions, R"({"prompt":"x","echo":true,"stream":true})").param, "echo");
  EXPECT_EQ(parse_error(Endpoint::ChatCompletions, R"({"messages":[{"role":"user","content":"x"}],"echo":true})").param,
            "echo");
}
