// model/quant_mix.h against llama.cpp's llama_tensor_get_type as read from
// src/llama-quant.cpp (early 2025), for model shapes the shared llama-d256
// files do not have: 22 layers with GQA 8 (TinyLlama-1.1B), tied
// embeddings, 8 experts, a 70B-type model, and rows that are not multiples
// of 256 (the fallbacks). test_cli_quantize checks the d256 shapes against
// llama.cpp's own files.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/quant_mix.h"

namespace nexus {
namespace {

using T = GgmlType;

MixModelInfo tinyllama() {
  MixModelInfo m;
  m.arch = "llama";
  m.n_layer = 22, m.n_head = 32, m.n_head_kv = 4, m.n_attention_wv = 22, m.has_output = true;
  return m;
}

const QuantMix& mix(const char* name) {
  const QuantMix* m = find_quant_mix(name);
  EXPECT_NE(m, nullptr) << name;
  return *m;
}

// The type of `kind` (e.g. "attn_v.weight") in every layer, quantized in
// llama.cpp's order (layer by layer, names sorted within one).
std::vector<T> per_layer(const char* mix_name, const MixModelInfo& m, const std::string& kind,
                         std::vector<uint64_t> ne = {2048, 2048}) {
  MixRules rules(mix(mix_name), m);
  std::vector<T> types;
  const char* kinds[] = {"attn_k.weight", "attn_output.weight", "attn_q.weight", "attn_v.weight",
                         "ffn_down.weight", "ffn_gate.weight", "ffn_up.weight"};
  for (int l = 0; l < m.n_layer; ++l)
    for (const char* k : kinds) {
      const T t = rules.tensor_type("blk." + std::to_string(l) + "." + k, ne).type;
      if (kind == k) types.push_back(t);
    }
  return types;
}

// Layers where use_more_bits(i, 22) holds: i < 2, i >= 19, (i - 2) % 3 == 2.
std::vector<T> more_bits_22(T more, T base) {
  std::vector<T> v;
  for (int i = 0; i < 22; ++i) v.push_back(i < 2 || i >= 19 || (i - 2) % 3 == 2 ? more : base);
  return v;
}

TEST(QuantMix, NamesAndFtypes) {
  EXPECT_EQ(find_quant_mix("q4_k_m"), find_quant_mix("Q4_K_M"));
  EXPECT_EQ(find_quant_mix("Q4_K"), nullptr);  // a tensor type, not a mix
  EXPECT_EQ(mix("Q4_K_M").ftype, 15u);
  EXPECT_EQ(mix("IQ4_XS").ftype, 30u);
  EXPECT_EQ(mix("BF16").ftype, 32u);
  EXPECT_EQ(mix("Q3_K_S").default_type, T::Q3_K);
  EXPECT_EQ(quant_mixes().size(), 19u);
  EXPECT_EQ(parse_writable_type("q6_k"), T::Q6_K);
  EXPECT_FALSE(parse_writable_type("IQ2_XXS").has_value());  // no quantizer for it
}

TEST(QuantMix, WhichTensorsAreQuantized) {
  EXPECT_TRUE(tensor_is_quantizable("blk.0.attn_q.weight", std::vector<uint64_t>{256, 256}));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_norm.weight", std::vector<uint64_t>{256}));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_q.bias", std::vector<uint64_t>{256, 2}));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.ffn_gate_inp.weight", std::vector<uint64_t>{256, 8}));
  EXPECT_FALSE(tensor_is_quantizable("rope_freqs.weight", std::vector<uint64_t>{32, 1}));  // ggml_n_dims 1
  EXPECT_TRUE(tensor_is_quantizable("blk.0.ffn_up_exps.weight", std::vector<uint64_t>{256, 512, 8}));
}

TEST(QuantMix, Q4_K_M_GivesHalfTheAttnVAndFfnDownLayersQ6_K) {
  EXPECT_EQ(per_layer("Q4_K_M", tinyllama(), "attn_v.weight"), more_bits_22(T::Q6_K, T::Q4_K));
  EXPECT_EQ(per_layer("Q4_K_M", tinyllama(), "ffn_down.weight"), more_bits_22(T::Q6_K, T::Q4_K));
  EXPECT_EQ(per_layer("Q5_K_M", tinyllama(), "ffn_down.weight"), more_bits_22(T::Q6_K, T::Q5_K));
  EXPECT_EQ(per_layer("Q4_K_M", tinyllama(), "attn_q.weight"), std::vector<T>(22, T::Q4_K));
  EXPECT_EQ(per_layer("Q4_K_M", tinyllama(), "attn_output.weight"), std::vector<T>(22, T::Q4_K));
}

TEST(QuantMix, SmallAndLargeKMixes) {
  const MixModelInfo m = tinyllama();
  std::vector<T> first4(22, T::Q4_K), first2(22, T::Q4_K);
  for (int i = 0; i < 4; ++i) first4[static_cast<size_t>(i)] = T::Q5_K;
  for (int i = 0; i < 2; ++i) first2[static_cast<size_t>(i)] = T::Q5_K;
  EXPECT_EQ(per_layer("Q4_K_S", m, "attn_v.weight"), first4);   // i_attention_wv < 4
  EXPECT_EQ(per_layer("Q4_K_S", m, "ffn_down.weight"), first2); // i < n/8 = 2
  EXPECT_EQ(per_layer("Q5_K_S", m, "attn_v.weight"), std::vector<T>(22, T::Q5_K));
  std::vector<T> q3m_v(22, T::Q4_K), q3m_down(22, T::Q4_K);
  q3m_v[0] = q3m_v[1] = T::Q5_K;  // i_attention_wv < 2
  q3m_down[0] = T::Q5_K;          // i < n/16 = 1
  EXPECT_EQ(per_layer("Q3_K_M", m, "attn_v.weight"), q3m_v);
  EXPECT_EQ(per_layer("Q3_K_M", m, "ffn_down.weight"), q3m_down);
  EXPECT_EQ(per_layer("Q3_K_M", m, "attn_output.weight"), std::vector<T>(22, T::Q4_K));
  EXPECT_EQ(per_layer("Q3_K_L", m, "attn_output.weight"), std::vector<T>(22, T::Q5_K));
  EXPECT_EQ(per_layer("Q3_K_L", m, "ffn_down.weight"), std::vector<T>(22, T::Q5_K));
  EXPECT_EQ(per_layer("Q3_K_S", m, "attn_v.weight"), std::vector<T>(22, T::Q3_K));
}

TEST(QuantMix, GroupedQueryAttentionRaisesAttnV) {
  MixModelInfo gqa8 = tinyllama(), gqa2 = tinyllama();
  gqa2.n_head_kv = 16;
  EXPECT_EQ(per_layer("Q2_K", gqa8, "attn_v.weight"), std::vector<T>(22, T::Q4_K));
  EXPECT_EQ(per_layer("Q2_K", gqa2, "attn_v.weight"), std::vector<T>(22, T::Q3_K));
  EXPECT_EQ(per_layer("Q2_K", gqa8, "ffn_down.weight"), std::vector<T>(22, T::Q3_K));
  EXPECT_EQ(per_layer("Q2_K", gqa8, "attn_output.weight"), std::vector<T>(22, T::Q3_K));
  EXPECT_EQ(per_layer("IQ4_XS", gqa8, "attn_v.weight"), std::vector<T>(22, T::Q5_K));
  EXPECT_EQ(per_layer("IQ4_NL", gqa2, "attn_v.weight"), std::vector<T>(22, T::IQ4_NL));
  std::vector<T> iq4_down(22, T::IQ4_XS);
  iq4_down[0] = iq4_down[1] = T::Q5_K;  // i < n/8 without an importance matrix
  EXPECT_EQ(per_layer("IQ4_XS", gqa8, "ffn_down.weight"), iq4_down);
}

TEST(QuantMix, SeventyBAndEightExperts) {
  MixModelInfo big = tinyllama();
  big.n_layer = big.n_attention_wv = 80;
  big.is_70b = true;
  EXPECT_EQ(per_layer("Q3_K_S", big, "attn_v.weight"), std::vector<T>(80, T::Q5_K));
  MixModelInfo moe = tinyllama();
  moe.n_expert = 8;
  EXPECT_EQ(per_layer("Q4_K_M", moe, "attn_v.weight"), std::vector<T>(22, T::Q8_0));
  EXPECT_EQ(per_layer("Q4_K_M", moe, "attn_k.weight"), std::vector<T>(22, T::Q8_0));
  EXPECT_EQ(per_layer("Q4_K_M", moe, "attn_output.weight"), std::vector<T>(22, T::Q5_K));
  EXPECT_EQ(per_layer("Q5_K_M", moe, "attn_output.weight"), std::vector<T>(22, T::Q5_K));
}

TEST(QuantMix, OutputAndTokenEmbeddings) {
  MixModelInfo tied = tinyllama();
  tied.has_output = false;
  const std::vector<uint64_t> ne = {2048, 32000};
  for (const char* name : {"Q4_0", "Q4_K_M", "Q2_K", "IQ4_NL", "Q6_K"}) {
    MixRules untied(mix(name), tinyllama()), tied_rules(mix(name), tied);
    EXPECT_EQ(untied.tensor_type("output.weight", ne).type, T::Q6_K) << name;
    EXPECT_EQ(untied.tensor_type("token_embd.weight", ne).type, mix(name).default_type) << name;
    EXPECT_EQ(tied_rules.tensor_type("token_embd.weight", ne).type, T::Q6_K) << name;
  }
  MixRules q8(mix("Q8_0"), tinyllama());
  EXPECT_EQ(q8.tensor_type("output.weight", ne).type, T::Q8_0);
  // Rows of 64: Q8_0 for the output whatever the mix.
  MixRules small(mix("Q4_K_M"), tinyllama());
  EXPECT_EQ(small.tensor_type("output.weight", std::vector<uint64_t>{64, 512}).type, T::Q8_0);
  // --output-type also reaches a tied token_embd (then the row fallback applies).
  MixRules over(mix("Q4_K_M"), tied, T::Q4_K);
  EXPECT_EQ(over.tensor_type("token_embd.weight", ne).type, T::Q4_K);
}

TEST(QuantMix, RowFallbacks) {
  EXPECT_EQ(fallback_type(T::Q4_K, 256), T::Q4_K);
  EXPECT_EQ(fallback_type(T::Q2_K, 64), T::IQ4_NL);
  EXPECT_EQ(fallback_type(T::Q3_K, 64), T::IQ4_NL);
  EXPECT_EQ(fallback_type(T::IQ4_XS, 64), T::IQ4_NL);
  EXPECT_EQ(fallback_type(T::Q4_K, 64), T::Q5_0);
  EXPECT_EQ(fallback_type(T::Q5_K, 64), T::Q5_1);
  EXPECT_EQ(fallback_type(T::Q6_K, 64), T::Q8_0);
  EXPECT_EQ(fallback_type(T::Q4_K, 172), T::F16);  // Q5_0 needs 32 too
  EXPECT_EQ(fallback_type(T::Q8_0, 172), T::F16);  // llama.cpp refuses; nexus keeps F16
  MixRules rules(mix("Q4_K_M"), tinyllama());
  const MixRules::Choice c = rules.tensor_type("blk.0.ffn_down.weight", std::vector<uint64_t>{5632 + 64, 2048});
  EXPECT_EQ(c.type, T::Q8_0);  // use_more_bits(0): Q6_K, then the fallback
  EXPECT_NE(c.fallback.find("not a multiple of the Q6_K block of 256"), std::string::npos) << c.fallback;
}

}  // namespace
}  // namespace nexus
