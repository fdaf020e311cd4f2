// The family table: one row per general.architecture, the tensors it reads
// (llama.cpp src/llama-model.cpp load_tensors; TENSOR_NOT_REQUIRED there is
// Optional here) and the flags of its graph (llama-model.cpp build_*).
#include "model/arch.h"

#include <array>
#include <iterator>

namespace nexus {
namespace {

using L = LayerTensor;
using M = ModelTensor;
constexpr Need R = Need::Required;
constexpr Need O = Need::Optional;

// llama, mistral: biases optional, as llama.cpp reads them (some fine-tunes carry them).
constexpr TensorUse<L> kLlamaLayer[] = {
    {L::AttnNorm, R}, {L::Wq, R},      {L::Wk, R},    {L::Wv, R},      {L::Bq, O},    {L::Bk, O},
    {L::Bv, O},       {L::Wo, R},      {L::Bo, O},    {L::FfnNorm, R}, {L::WGate, R}, {L::WUp, R},
    {L::WDown, R},
};
constexpr TensorUse<L> kQwen2Layer[] = {
    {L::AttnNorm, R}, {L::Wq, R},      {L::Wk, R},    {L::Wv, R},   {L::Bq, R},    {L::Bk, R}, {L::Bv, R},
    {L::Wo, R},       {L::FfnNorm, R}, {L::WGate, R}, {L::WUp, R},  {L::WDown, R},
};
constexpr TensorUse<L> kQwen3Layer[] = {
    {L::AttnNorm, R}, {L::Wq, R},      {L::Wk, R},    {L::Wv, R},  {L::QNorm, R}, {L::KNorm, R},
    {L::Wo, R},       {L::FfnNorm, R}, {L::WGate, R}, {L::WUp, R}, {L::WDown, R},
};
// phi3: attn_qkv (Q rows, then K, then V) or separate Q/K/V; ffn_up holds
// the gate rows then the up rows.
constexpr TensorUse<L> kPhi3Layer[] = {
    {L::AttnNorm, R}, {L::Wqkv, O},    {L::Wq, O},       {L::Wk, O},    {L::Wv, O},
    {L::Wo, R},       {L::FfnNorm, R}, {L::WUpFused, R}, {L::WDown, R},
};
constexpr TensorUse<L> kGemma2Layer[] = {
    {L::AttnNorm, R}, {L::Wq, R},    {L::Wk, R},  {L::Wv, R},    {L::Wo, R},          {L::AttnPostNorm, R},
    {L::FfnNorm, R},  {L::WGate, R}, {L::WUp, R}, {L::WDown, R}, {L::FfnPostNorm, R},
};
constexpr TensorUse<L> kGemma3Layer[] = {
    {L::AttnNorm, R}, {L::Wq, R},          {L::Wk, R},      {L::Wv, R},    {L::QNorm, R},
    {L::KNorm, R},    {L::Wo, R},          {L::AttnPostNorm, R}, {L::FfnNorm, R}, {L::WGate, R},
    {L::WUp, R},      {L::WDown, R},       {L::FfnPostNorm, R},
};
constexpr TensorUse<L> kStarcoder2Layer[] = {
    {L::AttnNorm, R}, {L::AttnNormB, R}, {L::Wq, R},  {L::Wk, R},    {L::Wv, R},    {L::Bq, R},
    {L::Bk, R},       {L::Bv, R},        {L::Wo, R},  {L::Bo, R},    {L::FfnNorm, R}, {L::FfnNormB, R},
    {L::WUp, R},      {L::BUp, R},       {L::WDown, R}, {L::BDown, R},
};

// Output optional everywhere: without it the embedding is reused (tied).
constexpr TensorUse<M> kLlamaModel[] = {{M::TokEmbd, R}, {M::OutputNorm, R}, {M::Output, O}, {M::RopeFreqs, O}};
constexpr TensorUse<M> kPlainModel[] = {{M::TokEmbd, R}, {M::OutputNorm, R}, {M::Output, O}};
constexpr TensorUse<M> kPhi3Model[] = {
    {M::TokEmbd, R}, {M::OutputNorm, R}, {M::Output, O}, {M::RopeLong, O}, {M::RopeShort, O}};
constexpr TensorUse<M> kStarcoder2Model[] = {{M::TokEmbd, R}, {M::OutputNorm, R}, {M::OutputNormB, R}, {M::Output, O}};

struct Family {
  ArchTraits traits;
  std::span<const TensorUse<L>> layer;
  std::span<const TensorUse<M>> model;
};

const Family kFamilies[] = {
    {{.name = "llama"}, kLlamaLayer, kLlamaModel},
    {{.name = "mistral"}, kLlamaLayer, kLlamaModel},
    {{.name = "qwen2", .rope = RopeType::Neox}, kQwen2Layer, kPlainModel},
    {{.name = "qwen3", .rope = RopeType::Neox}, kQwen3Layer, kPlainModel},
    {{.name = "phi3", .rope = RopeType::Neox}, kPhi3Layer, kPhi3Model},
    {{.name = "gemma2",
      .rope = RopeType::Neox,
      .act = FfnAct::Gelu,
      .embd_scale = true,
      .post_norms = true,
      .softcaps = SoftCaps::AttnAndFinal,
      .swa_period = 2},
     kGemma2Layer,
     kPlainModel},
    {{.name = "gemma3",
      .rope = RopeType::Neox,
      .act = FfnAct::Gelu,
      .embd_scale = true,
      .post_norms = true,
      .softcaps = SoftCaps::FinalWithoutWindow,
      .swa_period = 6,
      .rope_base_swa = 10000.0f},
     kGemma3Layer,
     kPlainModel},
    {{.name = "starcoder2", .rope = RopeType::Neox, .norm = NormType::Layer, .act = FfnAct::Gelu, .gated_ffn = false},
     kStarcoder2Layer,
     kStarcoder2Model},
};

const Family& family_of(const ArchTraits& a) {
  for (const Family& f : kFamilies)
    if (&f.traits == &a) return f;
  return kFamilies[0];  // unreachable: every ArchTraits comes from find_arch
}

}  // namespace

const ArchTraits* find_arch(std::string_view name) {
  for (const Family& f : kFamilies)
    if (name == f.traits.name) return &f.traits;
  return nullptr;
}

std::string supported_arch_names() {
  std::string s;
  for (const Family& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.traits.name);
  return s;
}

std::span<const TensorUse<LayerTensor>> layer_tensors(const ArchTraits& a) { return family_of(a).layer; }
std::span<const TensorUse<ModelTensor>> model_tensors(const ArchTraits& a) { return family_of(a).model; }

const char* tensor_name(LayerTensor t) {
  switch (t) {
    case L::AttnNorm: return "attn_norm.weight";
    case L::AttnNormB: return "attn_norm.bias";
    case L::Wq: return "attn_q.weight";
    case L::Wk: return "attn_k.weight";
    case L::Wv: return "attn_v.weight";
    case L::Wqkv: return "attn_qkv.weight";
    case L::Bq: return "attn_q.bias";
    case L::Bk: return "attn_k.bias";
    case L::Bv: return "attn_v.bias";
    case L::QNorm: return "attn_q_norm.weight";
    case L::KNorm: return "attn_k_norm.weight";
    case L::Wo: return "attn_output.weight";
    case L::Bo: return "attn_output.bias";
    case L::AttnPostNorm: return "post_attention_norm.weight";
    case L::FfnNorm: return "ffn_norm.weight";
    case L::FfnNormB: return "ffn_norm.bias";
    case L::WGate: return "ffn_gate.weight";
    case L::WUp: return "ffn_up.weight";
    case L::WUpFused: return "ffn_up.weight";
    case L::BUp: return "ffn_up.bias";
    case L::WDown: return "ffn_down.weight";
    case L::BDown: return "ffn_down.bias";
    case L::FfnPostNorm: return "post_ffw_norm.weight";
  }
  return "?";
}

const char* tensor_name(ModelTensor t) {
  switch (t) {
    case M::TokEmbd: return "token_embd.weight";
    case M::OutputNorm: return "output_norm.weight";
    case M::OutputNormB: return "output_norm.bias";
    case M::Output: return "output.weight";
    case M::RopeFreqs: return "rope_freqs.weight";
    case M::RopeLong: return "rope_factors_long.weight";
    case M::RopeShort: return "rope_factors_short.weight";
  }
  return "?";
}

TensorShape tensor_shape(LayerTensor t, const TensorDims& d) {
  const int64_t E = d.n_embd, Q = d.n_q, KV = d.n_kv, F = d.n_ff;
  switch (t) {
    case L::AttnNorm:
    case L::AttnNormB:
    case L::Bo:
    case L::AttnPostNorm:
    case L::FfnNorm:
    case L::FfnNormB:
    case L::BDown:
    case L::FfnPostNorm: return {1, E};
    case L::Wq: return {Q, E};
    case L::Wk:
    case L::Wv: return {KV, E};
    case L::Wqkv: return {Q + 2 * KV, E};
    case L::Bq: return {1, Q};
    case L::Bk:
    case L::Bv: return {1, KV};
    case L::QNorm:
    case L::KNorm: return {1, d.head_dim};
    case L::Wo: return {E, Q};
    case L::WGate:
    case L::WUp: return {F, E};
    case L::WUpFused: return {2 * F, E};
    case L::BUp: return {1, F};
    case L::WDown: return {E, F};
  }
  return {0, 0};
}

TensorShape tensor_shape(ModelTensor t, const TensorDims& d) {
  switch (t) {
    case M::TokEmbd:
    case M::Output: return {d.n_vocab, d.n_embd};
    case M::OutputNorm:
    case M::OutputNormB: return {1, d.n_embd};
    case M::RopeFreqs:
    case M::RopeLong:
    case M::RopeShort: return {1, d.n_rot / 2};
  }
  return {0, 0};
}

}  // namespace nexus
