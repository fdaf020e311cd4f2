// Constrained decoding end to end: response_format json_object and GBNF
// grammars through the HTTP server and the Engine (TinyLLama-v0, a 32000-token
// SentencePiece vocabulary): whatever the model would say, the output is a
// sentence of the grammar (or, cut by max_tokens, a prefix of one).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "support/engine_server.h"
#include "support/http_client.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class ServerGrammar : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    start("TinyLLama-v0.F32.gguf", eo);
  }
};

// Whether `text` is a prefix of a sentence of `gbnf` (complete: a sentence).
bool follows(const std::string& gbnf, const std::string& text, bool complete) {
  auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
  grammar::Matcher m(g, std::make_shared<grammar::VocabTrie>(std::vector<std::string>{"x"}));
  return m.accept(text) && (!complete || m.can_end());
}

TEST_F(ServerGrammar, AGrammarDecidesTheAnswer) {
  const char* gbnf = R"(root ::= ("yes" | "no") "." [ ]? "Because" [a-z ]{1,40} "!")";
  for (int seed = 0; seed < 4; ++seed) {
    const json j = post("/v1/completions", {{"prompt", "Is the sky blue? Answer:"}, {"max_tokens", 60},
                                            {"temperature", 1.0}, {"seed", seed}, {"grammar", gbnf}});
    const std::string text = j["choices"][0]["text"];
    const std::string finish = j["choices"][0]["finish_reason"];
    EXPECT_TRUE(follows(gbnf, text, finish == "stop")) << finish << ": " << text;
    EXPECT_TRUE(text.rfind("yes.", 0) == 0 || text.rfind("no.", 0) == 0) << text;
  }
}

TEST_F(ServerGrammar, JsonObjectStreamedAndNot) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "Describe a cat as JSON."}}}},
                     {"max_tokens", 80}, {"temperature", 0}, {"response_format", {{"type", "json_object"}}}};
  const json j = post("/v1/chat/completions", body);
  const std::string text = j["choices"][0]["message"]["content"];
  const std::string finish = j["choices"][0]["finish_reason"];
  ASSERT_TRUE(follows(grammar::json_object_gbnf(), text, finish == "stop")) << finish << ": " << text;
  if (finish == "stop") {
    EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
  }
  EXPECT_EQ(text.front(), '{');

  json sbody = body;
  sbody["stream"] = true;
  const HttpResponse r = post_raw("/v1/chat/completions", sbody);
  ASSERT_EQ(r.status, 200);
  const auto events = split_sse(r.body);
  ASSERT_TRUE(events.has_value()) << r.body;
  std::string streamed;
  for (const std::string& ev : *events) {
    if (ev == "[DONE]") break;
    streamed += json::parse(ev)["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(streamed, text);  // greedy: the same constrained output
}

TEST_F(ServerGrammar, AShortGrammarEndsTheGeneration) {
  const json j = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 50}, {"temperature", 0},
                                          {"grammar", R"(root ::= " there was" | " the end")"}});
  const std::string text = j["choices"][0]["text"];
  EXPECT_TRUE(text == " there was" || text == " the end") << text;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");  // the grammar was complete: only EOS was left
}

TEST_F(ServerGrammar, BadGrammarsAre400sNamingTheField) {
  for (const char* g : {"root ::= missing", "root ::= \"open", "root ::= root \"a\""}) {
    const HttpResponse r = post_raw("/v1/completions", {{"prompt", "x"}, {"grammar", g}});
    EXPECT_EQ(r.status, 400) << g;
    EXPECT_EQ(json::parse(r.body)["error"]["param"], "grammar") << r.body;
  }
  const HttpResponse r = post_raw("/v1/completions",
                                  {{"prompt", "x"},
                                   {"response_format", {{"type", "json_schema"},
                                                        {"json_schema", {{"schema", {{"type", "string"}, {"minimum", 1}}}}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "response_format.json_schema.schema") << r.body;
}

TEST_F(ServerGrammar, JsonSchemaOutputsValidate) {
  const json schema = json::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
      "legs":{"type":"integer"},"color":{"enum":["black","white","orange"]}},"required":["name","legs","color"],
      "additionalProperties":false})");
  int complete = 0;
  for (int seed = 0; seed < 3; ++seed) {
    const json j = post("/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "A cat as JSON"}}}},
                         {"max_tokens", 100}, {"temperature", 0.8}, {"seed", seed},
                         {"response_format", {{"type", "json_schema"},
                                              {"json_schema", {{"name", "cat"}, {"strict", true}, {"schema", schema}}}}}});
    const std::string text = j["choices"][0]["message"]["content"];
    if (j["choices"][0]["finish_reason"] != "stop") continue;  // cut by max_tokens: a prefix (checked by the grammar tests)
    ++complete;
    const json v = json::parse(text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << text;
    EXPECT_TRUE(v["name"].is_string() && v["name"].get<std::string>().size() <= 12) << text;
    EXPECT_TRUE(v["legs"].is_number_integer()) << text;
    EXPECT_TRUE(v["color"] == "black" || v["color"] == "white" || v["color"] == "orange") << text;
    EXPECT_EQ(v.size(), 3u) << text;
  }
  EXPECT_GT(complete, 0) << "no answer finished within max_tokens: nothing was validated";
}

}  // namespace
