// logprobs and logit_bias end to end: `nexus serve`'s HTTP server over the
// real Engine (stories260K), its answers checked against a direct
// log-softmax of the logits LlamaContext computes for the same tokens.
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

class ServerLogprobs : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 512;
    eo.kv_type = KvType::F32;  // as LlamaContext's cache, so the logits agree to float rounding
    start("stories260K.gguf", eo);
  }

  // log_softmax of the logits after `tokens`, in float64.
  std::vector<double> reference(const std::vector<int32_t>& tokens) {
    LlamaContext ctx(m_->model, 512, 1);
    const std::span<const float> l = ctx.eval(tokens);
    double max = -INFINITY, sum = 0;
    for (float x : l) max = std::max(max, static_cast<double>(x));
    for (float x : l) sum += std::exp(x - max);
    std::vector<double> out;
    for (float x : l) out.push_back(x - max - std::log(sum));
    return out;
  }
};

TEST_F(ServerLogprobs, CompletionLogprobsEqualTheLogSoftmaxOfTheModel) {
  const std::string prompt = "Once upon a time";
  const json j = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 3}});
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << j.dump();
  ASSERT_EQ(lp["tokens"].size(), 6u) << lp.dump();
  std::vector<int32_t> tokens = m_->tok->encode(prompt, m_->tok->add_bos_default());
  for (size_t i = 0; i < 6; ++i) {
    const std::vector<double> ref = reference(tokens);
    // Greedy: the chosen token is the argmax, and the reported value is its log-softmax.
    const auto best = static_cast<int32_t>(std::max_element(ref.begin(), ref.end()) - ref.begin());
    EXPECT_EQ(lp["tokens"][i], m_->tok->token_to_piece(best, true)) << i;
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), ref[best], 1e-4) << i;
    // top_logprobs: the 3 most likely plus the sampled one (here among them).
    EXPECT_EQ(lp["top_logprobs"][i].size(), 3u) << lp["top_logprobs"][i].dump();
    for (const auto& [piece, v] : lp["top_logprobs"][i].items()) EXPECT_LE(v.get<double>(), ref[best] + 1e-4);
    EXPECT_EQ(lp["text_offset"][i].is_number_integer(), true);
    tokens.push_back(best);
  }
}

TEST_F(ServerLogprobs, ChatLogprobsStreamedEqualNonStreamed) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                     {"max_tokens", 8}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 4}};
  const json j = post("/v1/chat/completions", body);
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 8u) << j.dump();
  std::string joined;
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 4u);
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);  // greedy: the best is the one chosen
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);
    std::string bytes;
    for (const json& b : e["bytes"]) bytes += static_cast<char>(b.get<int>());
    EXPECT_EQ(bytes, e["token"].get<std::string>());
    for (size_t k = 1; k < 4; ++k) EXPECT_LE(e["top_logprobs"][k]["logprob"], e["top_logprobs"][k - 1]["logprob"]);
    joined += bytes;
  }
  // The pieces are the message, but for the leading space SentencePiece's first piece carries.
  const std::string message = j["choices"][0]["message"]["content"];
  EXPECT_NE(joined.find(message), std::string::npos) << joined << " | " << message;

  json sbody = body;
  sbody["stream"] = true;
  HttpClient c("127.0.0.1", server_->port());
  const HttpResponse r = c.post("/v1/chat/completions", sbody.dump());
  ASSERT_EQ(r.status, 200);
  const auto events = split_sse(r.body);
  ASSERT_TRUE(events.has_value());
  json streamed = json::array();
  for (const std::string& ev : *events) {
    if (ev == "[DONE]") break;
    const json chunk = json::parse(ev);
    const json& lp = chunk["choices"][0]["logprobs"];
    if (lp.is_object())
      for (const json& e : lp["content"]) streamed.push_back(e);
  }
  EXPECT_EQ(streamed, content);
}

TEST_F(ServerLogprobs, LogitBiasBansAndForcesTokens) {
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 0}};
  const std::vector<double> ref = reference(m_->tok->encode("Once upon a time", m_->tok->add_bos_default()));
  const auto first_id = static_cast<int32_t>(std::max_element(ref.begin(), ref.end()) - ref.begin());
  const std::string first = m_->tok->token_to_piece(first_id, true);
  const json plain = post("/v1/completions", base);
  ASSERT_EQ(plain["choices"][0]["logprobs"]["tokens"][0], first);

  json banned = base;
  banned["logit_bias"] = {{std::to_string(first_id), -100}};
  const json b = post("/v1/completions", banned);
  EXPECT_NE(b["choices"][0]["logprobs"]["tokens"][0], first);

  const int32_t forced_id = 300;
  json forced = base;
  forced["logit_bias"] = {{std::to_string(forced_id), 100}};
  const json f = post("/v1/completions", forced);
  EXPECT_EQ(f["choices"][0]["logprobs"]["tokens"][0], m_->tok->token_to_piece(forced_id, true));

  HttpClient c("127.0.0.1", server_->port());
  json oov = base;
  oov["logit_bias"] = {{std::to_string(m_->tok->n_vocab()), 1}};
  const HttpResponse r = c.post("/v1/completions", oov.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "logit_bias");
}

}  // namespace
