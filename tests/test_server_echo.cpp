// echo on /v1/completions end to end (engine.h prompt_logprobs): the
// prompt's token logprobs against a direct log-softmax of LlamaContext's
// logits of every prompt position, with max_tokens 0 (scoring) and with a
// completion; the prefix cache never hands an echo request positions
// without logits; the combinations it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/llama_context.h"
#include "support/engine_server.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class ServerEcho : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 512;
    eo.kv_type = KvType::F32;  // as LlamaContext's cache, so the logits agree to float rounding
    start("stories260K.gguf", eo);
  }

  // log_softmax(logits after tokens[0..p))[tokens[p]] for p >= 1, in float64.
  std::vector<double> reference(const std::vector<int32_t>& tokens) {
    LlamaContext ctx(m_->model, 512, 1);
    const std::span<const float> all = ctx.eval_all(tokens);
    const size_t nv = all.size() / tokens.size();
    std::vector<double> out(tokens.size(), NAN);
    for (size_t p = 1; p < tokens.size(); ++p) {
      const std::span<const float> l = all.subspan((p - 1) * nv, nv);
      double max = -INFINITY, sum = 0;
      for (float x : l) max = std::max(max, static_cast<double>(x));
      for (float x : l) sum += std::exp(x - max);
      out[p] = l[static_cast<size_t>(tokens[p])] - max - std::log(sum);
    }
    return out;
  }
};

const std::string kPrompt = "Once upon a time, there was a little girl named Lily. She loved to play outside.";

}  // namespace

TEST_F(ServerEcho, ScoringReturnsThePromptsLogprobsFirstNull) {
  const json j = post("/v1/completions", {{"prompt", kPrompt}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}});
  const json& c = j["choices"][0];
  EXPECT_EQ(c["text"], kPrompt);
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
  const std::vector<int32_t> tokens = m_->tok->encode(kPrompt, m_->tok->add_bos_default(), true);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens.size());
  const json& lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), tokens.size()) << lp.dump();
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  const std::vector<double> ref = reference(tokens);
  for (size_t p = 1; p < tokens.size(); ++p) {
    EXPECT_EQ(lp["tokens"][p], m_->tok->token_to_piece(tokens[p], true)) << p;
    EXPECT_NEAR(lp["token_logprobs"][p].get<double>(), ref[p], 1e-4) << p;
    // The 2 most likely, plus the prompt's own token when it is not among them.
    const size_t n_top = lp["top_logprobs"][p].size();
    EXPECT_TRUE(n_top == 2 || n_top == 3) << lp["top_logprobs"][p].dump();
    EXPECT_EQ(lp["text_offset"][p].get<int64_t>() - lp["text_offset"][p - 1].get<int64_t>(),
              static_cast<int64_t>(lp["tokens"][p - 1].get<std::string>().size()));
  }
}

TEST_F(ServerEcho, EchoWithACompletionAndThePrefixCacheWarm) {
  // A plain request first leaves the prompt's blocks in the prefix cache;
  // the echo request must still compute (and score) every position.
  const json plain = post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0},
                                              {"logprobs", 0}});
  const json j = post("/v1/completions", {{"prompt", kPrompt}, {"echo", true}, {"logprobs", 0}, {"max_tokens", 4},
                                          {"temperature", 0}});
  const json& c = j["choices"][0];
  EXPECT_EQ(c["text"], kPrompt + plain["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::vector<int32_t> tokens = m_->tok->encode(kPrompt, m_->tok->add_bos_default(), true);
  const json& lp = c["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), tokens.size() + 4) << lp.dump();
  const std::vector<double> ref = reference(tokens);
  for (size_t p = 1; p < tokens.size(); ++p) EXPECT_NEAR(lp["token_logprobs"][p].get<double>(), ref[p], 1e-4) << p;
  for (size_t i = 0; i < 4; ++i)  // the completion's part equals the plain request's
    EXPECT_NEAR(lp["token_logprobs"][tokens.size() + i].get<double>(),
                plain["choices"][0]["logprobs"]["token_logprobs"][i].get<double>(), 1e-5);
}

TEST_F(ServerEcho, TokenPromptsEchoTheirText) {
  const std::vector<int32_t> tokens = m_->tok->encode("The cat sat", m_->tok->add_bos_default(), true);
  const json j = post("/v1/completions", {{"prompt", tokens}, {"echo", true}, {"max_tokens", 0}});
  EXPECT_EQ(j["choices"][0]["text"], m_->tok->decode(tokens));
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["text"], "The cat sat");
}

TEST_F(ServerEcho, RefusedCombinationsNameTheParameter) {
  const struct {
    const char* path;
    json body;
    const char* param;
  } cases[] = {
      {"/v1/completions", {{"prompt", "x"}, {"echo", true}, {"stream", true}}, "echo"},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"echo", true}}, "echo"},
      {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {"/v1/completions", {{"prompt", "x"}, {"echo", "yes"}}, "echo"},
      {"/v1/completions", {{"prompt", "x"}, {"echo", true}, {"max_tokens", -1}}, "max_tokens"},
  };
  for (const auto& c : cases) {
    const HttpResponse r = post_raw(c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump() << " " << r.body;
    const json e = json::parse(r.body, nullptr, false);
    EXPECT_EQ(e["error"]["param"], c.param) << r.body;
  }
}
