#include "model/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <fmt/format.h>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace nexus {
namespace {

// llama_ftype values (llama.h); the names are llama-quantize's.
enum Ftype : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9, kQ2_K = 10,
  kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14, kQ4_K_M = 15, kQ5_K_S = 16,
  kQ5_K_M = 17, kQ6_K = 18, kIQ4_NL = 25, kIQ4_XS = 30, kBF16 = 32,
};

using T = GgmlType;

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

uint32_t block_size(GgmlType t) { return ggml_type_traits(static_cast<uint32_t>(t))->block_size; }

// llama.cpp's use_more_bits: the first and last eighth of the layers, and
// every third one in between.
bool use_more_bits(int32_t i, int32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// An integer key that may be a per-layer array (head_count_kv of some
// models): the scalar, or the array's first element.
std::optional<int64_t> first_int(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufValueType::ARRAY) {
    const GgufArray* a = f.get_array(key);
    if (a->ints.empty()) return std::nullopt;
    return a->ints.front();
  }
  return f.get_int(key);
}

}  // namespace

const std::vector<QuantMix>& quant_mixes() {
  static const std::vector<QuantMix> mixes = {
      {"F32", kF32, T::F32, "32 bits per weight: no conversion loss"},
      {"F16", kF16, T::F16, "16 bpw, IEEE half precision"},
      {"BF16", kBF16, T::BF16, "16 bpw, bfloat16"},
      {"Q8_0", kQ8_0, T::Q8_0, "8.5 bpw; the output matrix stays Q8_0"},
      {"Q4_0", kQ4_0, T::Q4_0, "4.5 bpw, Q6_K output"},
      {"Q4_1", kQ4_1, T::Q4_1, "5.0 bpw, Q6_K output"},
      {"Q5_0", kQ5_0, T::Q5_0, "5.5 bpw, Q6_K output"},
      {"Q5_1", kQ5_1, T::Q5_1, "6.0 bpw, Q6_K output"},
      {"Q2_K", kQ2_K, T::Q2_K, "Q2_K with Q3_K ffn_down / attn_output, Q3_K or Q4_K attn_v"},
      {"Q3_K_S", kQ3_K_S, T::Q3_K, "Q3_K everywhere but the output"},
      {"Q3_K_M", kQ3_K_M, T::Q3_K, "Q3_K with Q4_K/Q5_K attn_v, ffn_down, attn_output"},
      {"Q3_K_L", kQ3_K_L, T::Q3_K, "Q3_K with Q5_K attn_v, ffn_down, attn_output"},
      {"Q4_K_S", kQ4_K_S, T::Q4_K, "Q4_K with Q5_K in the first attn_v / ffn_down layers"},
      {"Q4_K_M", kQ4_K_M, T::Q4_K, "Q4_K with Q6_K in about half of the attn_v / ffn_down layers"},
      {"Q5_K_S", kQ5_K_S, T::Q5_K, "Q5_K everywhere but the output"},
      {"Q5_K_M", kQ5_K_M, T::Q5_K, "Q5_K with Q6_K in about half of the attn_v / ffn_down layers"},
      {"Q6_K", kQ6_K, T::Q6_K, "6.56 bpw everywhere"},
      {"IQ4_NL", kIQ4_NL, T::IQ4_NL, "4.5 bpw non-linear levels, blocks of 32"},
      {"IQ4_XS", kIQ4_XS, T::IQ4_XS, "4.25 bpw non-linear levels, super-blocks of 256"},
  };
  return mixes;
}

const QuantMix* find_quant_mix(std::string_view name) {
  for (const QuantMix& m : quant_mixes())
    if (iequal(m.name, name)) return &m;
  return nullptr;
}

std::string quant_mix_names() {
  std::string s;
  for (const QuantMix& m : quant_mixes()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

bool quantize_writable_type(GgmlType t) {
  switch (t) {
    case T::F32: case T::F16: case T::BF16: case T::Q8_0: case T::Q4_0: case T::Q4_1: case T::Q5_0:
    case T::Q5_1: case T::Q2_K: case T::Q3_K: case T::Q4_K: case T::Q5_K: case T::Q6_K: case T::IQ4_NL:
    case T::IQ4_XS:
      return true;
    default:
      return false;
  }
}

std::optional<GgmlType> parse_writable_type(std::string_view name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeTraits* t = ggml_type_traits(id);
    if (t && iequal(t->name, name) && quantize_writable_type(static_cast<GgmlType>(id)))
      return static_cast<GgmlType>(id);
  }
  return std::nullopt;
}

int tensor_n_dims(std::span<const uint64_t> ne) {
  int n = static_cast<int>(ne.size());
  while (n > 1 && ne[static_cast<size_t>(n) - 1] == 1) --n;
  return n;
}

bool tensor_is_quantizable(const std::string& name, std::span<const uint64_t> ne) {
  if (tensor_n_dims(ne) < 2) return false;
  if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  // llama.cpp keeps these as they are: norms, MoE routers, position and
  // token-type embeddings (BERT), Mamba's and RWKV's small 2-D weights, T5's
  // relative position bias.
  static const char* const kept_if_contains[] = {
      "_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight", "time_mix_first.weight",
      "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight",
      "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
      "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
  };
  for (const char* s : kept_if_contains)
    if (name.find(s) != std::string::npos) return false;
  return name != "position_embd.weight" && name != "token_types.weight";
}

MixModelInfo mix_model_info(const GgufFile& f) {
  MixModelInfo m;
  m.arch = f.get_string("general.architecture").value_or("");
  if (m.arch.empty()) throw Error(f.path() + ": no general.architecture: not a model file");
  const std::optional<int64_t> n_layer = f.get_int(m.arch + ".block_count");
  if (!n_layer || *n_layer <= 0 || *n_layer > (1 << 20))
    throw Error(fmt::format("{}: no valid {}.block_count", f.path(), m.arch));
  m.n_layer = static_cast<int32_t>(*n_layer);
  m.n_head = static_cast<int32_t>(first_int(f, m.arch + ".attention.head_count").value_or(0));
  m.n_head_kv = static_cast<int32_t>(first_int(f, m.arch + ".attention.head_count_kv").value_or(m.n_head));
  m.n_expert = static_cast<int32_t>(f.get_int(m.arch + ".expert_count").value_or(0));
  for (const TensorInfo& t : f.tensors()) {
    const std::string& n = t.name;
    if (n.find("attn_v.weight") != std::string::npos || n.find("attn_qkv.weight") != std::string::npos ||
        n.find("attn_kv_b.weight") != std::string::npos)
      ++m.n_attention_wv;
    else if (n == "output.weight")
      m.has_output = true;
  }
  m.is_70b = m.arch == "llama" && m.n_layer == 80 && m.n_head != m.n_head_kv;
  return m;
}

GgmlType fallback_type(GgmlType type, uint64_t ne0) {
  if (ne0 % block_size(type) == 0) return type;
  GgmlType t = T::F16;
  switch (type) {
    case T::TQ1_0: case T::TQ2_0: t = T::Q4_0; break;
    case T::IQ2_XXS: case T::IQ2_XS: case T::IQ2_S: case T::IQ3_XXS: case T::IQ3_S: case T::IQ1_S:
    case T::IQ1_M: case T::Q2_K: case T::Q3_K: case T::IQ4_XS: t = T::IQ4_NL; break;
    case T::Q4_K: t = T::Q5_0; break;
    case T::Q5_K: t = T::Q5_1; break;
    case T::Q6_K: t = T::Q8_0; break;
    default: break;  // llama.cpp throws "Unsupported tensor size encountered" here
  }
  return ne0 % block_size(t) == 0 ? t : T::F16;
}

MixRules::MixRules(const QuantMix& mix, const MixModelInfo& model, std::optional<GgmlType> output_type)
    : mix_(mix), model_(model), output_type_(output_type) {}

MixRules::Choice MixRules::tensor_type(const std::string& name, std::span<const uint64_t> ne) {
  Choice c{rule_type(name, ne), {}};
  const GgmlType chosen = c.type;
  c.type = fallback_type(chosen, ne[0]);
  if (c.type != chosen)
    c.fallback = fmt::format("rows of {} are not a multiple of the {} block of {}: {} instead", ne[0],
                             ggml_type_name(chosen), block_size(chosen), ggml_type_name(c.type));
  return c;
}

GgmlType MixRules::rule_type(const std::string& name, std::span<const uint64_t> ne) {
  const uint32_t ft = mix_.ftype;
  const int32_t gqa = model_.n_gqa();
  const bool eight_experts = model_.n_expert == 8;
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  // The layer of a per-layer tensor: its count so far, or (MoE models, whose
  // expert tensors llama.cpp once found out of order) the number in its name.
  auto layer = [&](int32_t counter) {
    int32_t i = counter;
    if (std::max(1, model_.n_expert) > 1) {
      if (std::sscanf(name.c_str(), "blk.%d.", &i) != 1) throw Error("cannot read the layer of tensor " + name);
      if (i < 0 || i >= model_.n_layer)
        throw Error(fmt::format("tensor {}: layer {} outside [0, {})", name, i, model_.n_layer));
    }
    return i;
  };
  GgmlType t = mix_.default_type;

  if (name == "output.weight" || (!model_.has_output && name == "token_embd.weight")) {
    if (output_type_) return *output_type_;
    if (ne[0] % 256 != 0) return T::Q8_0;
    return t == T::Q8_0 ? T::Q8_0 : T::Q6_K;
  }
  if (name == "token_embd.weight") return t;  // only the IQ1/IQ2/IQ3 mixes change it
  const int32_t n = model_.n_layer;
  if (has("attn_v.weight")) {
    const int32_t i = i_attention_wv_;
    if (ft == kQ2_K) t = gqa >= 4 ? T::Q4_K : T::Q3_K;
    else if (ft == kQ3_K_M) t = i < 2 ? T::Q5_K : T::Q4_K;
    else if (ft == kQ3_K_L) t = T::Q5_K;
    else if ((ft == kIQ4_NL || ft == kIQ4_XS) && gqa >= 4) t = T::Q5_K;
    else if ((ft == kQ4_K_M || ft == kQ5_K_M) && use_more_bits(i, model_.n_attention_wv)) t = T::Q6_K;
    else if (ft == kQ4_K_S && i < 4) t = T::Q5_K;
    // 70B: 8 query heads share each attn_v, so it is 8x smaller than attn_q
    // and more bits for it cost little.
    if (model_.is_70b && (t == T::Q3_K || t == T::Q4_K)) t = T::Q5_K;
    if (eight_experts) t = T::Q8_0;
    ++i_attention_wv_;
  } else if (has("attn_k.weight")) {
    if (eight_experts) t = T::Q8_0;
  } else if (has("attn_q.weight")) {
    // only the IQ3 mixes change it
  } else if (has("ffn_down")) {
    const int32_t i = layer(i_ffn_down_);
    if (ft == kQ2_K) t = T::Q3_K;
    else if (ft == kQ3_K_M) t = i < n / 16 ? T::Q5_K : T::Q4_K;
    else if (ft == kQ3_K_L) t = T::Q5_K;
    else if (ft == kQ4_K_M) t = use_more_bits(i, n) ? T::Q6_K : t;
    else if ((ft == kIQ4_NL || ft == kIQ4_XS) && i < n / 8) t = T::Q5_K;  // without an imatrix
    else if (ft == kQ5_K_M && use_more_bits(i, n)) t = T::Q6_K;
    else if (ft == kQ4_K_S && i < n / 8) t = T::Q5_K;
    ++i_ffn_down_;
  } else if (has("attn_output.weight")) {
    if (eight_experts) {
      if (ft == kQ2_K || ft == kQ3_K_S || ft == kQ3_K_M || ft == kIQ4_NL || ft == kQ4_K_S || ft == kQ4_K_M ||
          ft == kIQ4_XS)
        t = T::Q5_K;
    } else {
      if (ft == kQ2_K) t = T::Q3_K;
      else if (ft == kQ3_K_M) t = T::Q4_K;
      else if (ft == kQ3_K_L) t = T::Q5_K;
    }
  } else if (has("attn_qkv.weight")) {
    if (ft == kQ3_K_M || ft == kQ3_K_L) t = T::Q4_K;
    else if (ft == kQ4_K_M) t = T::Q5_K;
    else if (ft == kQ5_K_M) t = T::Q6_K;
  } else if (has("ffn_gate")) {
    layer(i_ffn_gate_);  // only IQ3_XS changes it; the layer check still applies
    ++i_ffn_gate_;
  } else if (has("ffn_up")) {
    layer(i_ffn_up_);
    ++i_ffn_up_;
  }
  return t;
}

}  // namespace nexus
