// POST /v1/embeddings (server/embeddings.h) over the real model
// (stories260K, which has no pooling_type: mean pooling), against the
// hidden states LlamaContext computes for the same tokens; pooling and
// base64 helpers; bad input naming the parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "model/llama_context.h"
#include "model/llama_model.h"
#include "server/embeddings.h"
#include "support/engine_server.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class ServerEmbeddings : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 256;
    start("stories260K.gguf", eo);
  }

  // Mean of the final hidden states, L2-normalized, in float64.
  std::vector<double> reference(const std::vector<int32_t>& ids) {
    LlamaContext ctx(m_->model, static_cast<int32_t>(ids.size()), 1);
    const std::span<const float> h = ctx.eval_hidden(ids);
    const size_t E = static_cast<size_t>(m_->model.config().n_embd);
    EXPECT_EQ(h.size(), ids.size() * E);
    std::vector<double> mean(E, 0.0);
    for (size_t t = 0; t < ids.size(); ++t)
      for (size_t i = 0; i < E; ++i) mean[i] += h[t * E + i] / static_cast<double>(ids.size());
    double ss = 0;
    for (double x : mean) ss += x * x;
    for (double& x : mean) x /= std::sqrt(ss);
    return mean;
  }

  std::vector<int32_t> tokens(const std::string& text) { return m_->tok->encode(text, m_->tok->add_bos_default(), true); }
};

std::vector<float> from_base64(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : 63;
  };
  std::string bytes;
  for (size_t i = 0; i + 4 <= s.size(); i += 4) {
    const uint32_t v = val(s[i]) << 18 | val(s[i + 1]) << 12 | (s[i + 2] == '=' ? 0 : val(s[i + 2]) << 6) |
                       (s[i + 3] == '=' ? 0 : val(s[i + 3]));
    bytes += static_cast<char>(v >> 16);
    if (s[i + 2] != '=') bytes += static_cast<char>(v >> 8);
    if (s[i + 3] != '=') bytes += static_cast<char>(v);
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace

TEST(Embeddings, PoolingAndBase64) {
  const std::vector<float> h = {1, 2, 3, 4, 5, 6};  // 3 tokens of width 2
  EXPECT_EQ(server::pool_hidden(h, 2, server::Pooling::Mean), (std::vector<float>{3, 4}));
  EXPECT_EQ(server::pool_hidden(h, 2, server::Pooling::Cls), (std::vector<float>{1, 2}));
  EXPECT_EQ(server::pool_hidden(h, 2, server::Pooling::Last), (std::vector<float>{5, 6}));
  EXPECT_EQ(server::pooling_of(-1), server::Pooling::Mean);
  EXPECT_EQ(server::pooling_of(2), server::Pooling::Cls);
  EXPECT_EQ(server::pooling_of(3), server::Pooling::Last);
  EXPECT_THROW(server::pooling_of(4), server::ApiError);
  std::vector<float> v = {3, 4};
  server::l2_normalize(v);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  EXPECT_EQ(server::base64_encode("Man"), "TWFu");
  EXPECT_EQ(server::base64_encode("Ma"), "TWE=");
  EXPECT_EQ(server::base64_encode("M"), "TQ==");
  EXPECT_EQ(server::base64_encode(""), "");
}

TEST_F(ServerEmbeddings, MeanOfTheFinalHiddenStatesNormalized) {
  const std::string text = "Once upon a time there was a cat";
  const json j = post("/v1/embeddings", {{"input", text}, {"model", "test-model"}});
  ASSERT_EQ(j["data"].size(), 1u) << j.dump();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  const std::vector<double> ref = reference(tokens(text));
  const json& e = j["data"][0]["embedding"];
  ASSERT_EQ(e.size(), ref.size());
  double ss = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(e[i].get<double>(), ref[i], 1e-5) << i;
    ss += e[i].get<double>() * e[i].get<double>();
  }
  EXPECT_NEAR(ss, 1.0, 1e-5);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens(text).size());
  EXPECT_EQ(j["usage"]["total_tokens"], tokens(text).size());
}

TEST_F(ServerEmbeddings, BatchesTokenArraysAndBase64AgreeWithStrings) {
  const std::string a = "The dog ran", b = "A bird sang in the tree";
  const json single = post("/v1/embeddings", {{"input", a}});
  const json batch = post("/v1/embeddings", {{"input", {a, b}}});
  ASSERT_EQ(batch["data"].size(), 2u);
  EXPECT_EQ(batch["data"][0]["embedding"], single["data"][0]["embedding"]);
  EXPECT_EQ(batch["data"][1]["index"], 1);
  EXPECT_NE(batch["data"][1]["embedding"], batch["data"][0]["embedding"]);
  EXPECT_EQ(batch["usage"]["prompt_tokens"], tokens(a).size() + tokens(b).size());
  const json ids = post("/v1/embeddings", {{"input", tokens(a)}});
  EXPECT_EQ(ids["data"][0]["embedding"], single["data"][0]["embedding"]);
  const json ids2 = post("/v1/embeddings", {{"input", {tokens(a), tokens(b)}}});
  EXPECT_EQ(ids2["data"][1]["embedding"], batch["data"][1]["embedding"]);
  const json b64 = post("/v1/embeddings", {{"input", a}, {"encoding_format", "base64"}, {"dimensions", 64}});
  ASSERT_TRUE(b64["data"][0]["embedding"].is_string()) << b64.dump();
  const std::vector<float> decoded = from_base64(b64["data"][0]["embedding"].get<std::string>());
  EXPECT_EQ(json(decoded), single["data"][0]["embedding"]);
}

TEST_F(ServerEmbeddings, BadInputNamesTheParameter) {
  ASSERT_EQ(m_->model.config().n_embd, 64);  // the dimensions case below
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "Once upon a time ";  // more tokens than n_ctx 256
  const struct {
    json body;
    const char* param;
  } cases[] = {
      {json::object(), "input"},
      {{{"input", ""}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", {"a", ""}}}, "input"},
      {{{"input", {json::array()}}}, "input"},
      {{{"input", {1, 99999}}}, "input"},
      {{{"input", {"a", 3}}}, "input"},
      {{{"input", 5}}, "input"},
      {{{"input", long_text}}, "input"},
      {{{"input", "a"}, {"encoding_format", "int8"}}, "encoding_format"},
      {{{"input", "a"}, {"dimensions", 32}}, "dimensions"},
      {{{"input", "a"}, {"model", "other"}}, "model"},
  };
  for (const auto& c : cases) {
    const HttpResponse r = post_raw("/v1/embeddings", c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump().substr(0, 200) << " " << r.body;
    EXPECT_EQ(json::parse(r.body, nullptr, false)["error"]["param"], c.param) << r.body;
  }
}
