// Architectures as data: what a model family computes, read from a GGUF
// file's metadata and tensor list, apart from where it runs.
//
// A family (general.architecture) is a row of kFamilies (arch.cpp): the
// flags of ArchTraits (how its layer differs from llama's) and the table of
// tensors it reads, each required or optional. LlamaConfig (model/
// llama_config.h) holds the hyper-parameters of one file; model/layer.h's
// forward_layer() is the one layer function every backend runs from them.
//
// Keys and tensor names follow the GGUF spec ("LLM" keys) and llama.cpp's
// reading of them (src/llama-arch.cpp LLM_TENSOR_NAMES, src/llama-model.cpp
// load_hparams / build graphs), so a file llama.cpp runs means the same here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace nexus {

// RoPE pairing. Norm: GGUF llama layout, pairs (2i, 2i+1) (the converter
// permuted Q/K). Neox: pairs (i, i + n_rot/2) (GPT-NeoX; qwen2, phi3, gemma,
// starcoder2).
enum class RopeType { Norm, Neox };
// RMSNorm (x / rms(x) * w) or LayerNorm ((x - mean) / std * w + b).
enum class NormType { Rms, Layer };
// Feed-forward: gated (act(x Wgate) * (x Wup)) Wdown, or plain act(x Wup + b) Wdown.
enum class FfnAct { Silu, Gelu };
// Which logit soft-caps a family reads (llama.cpp load_hparams): none;
// attn_logit_softcapping and final_logit_softcapping (gemma2);
// final_logit_softcapping only, applied when the file has no sliding window
// (gemma3: llama.cpp's non-iswa graph applies it, its iswa graph does not).
enum class SoftCaps { None, AttnAndFinal, FinalWithoutWindow };

struct ArchTraits {
  const char* name;         // general.architecture
  RopeType rope = RopeType::Norm;
  NormType norm = NormType::Rms;
  FfnAct act = FfnAct::Silu;
  bool gated_ffn = true;    // ffn_gate (or the gate half of a fused ffn_up) present
  bool embd_scale = false;  // x = tok_embd[token] * sqrt(n_embd) (gemma)
  bool post_norms = false;  // post_attention_norm / post_ffw_norm on each sub-layer's output (gemma2/3)
  SoftCaps softcaps = SoftCaps::None;
  // Which layers use the sliding window, when the file gives one: 0 = all;
  // p > 0 = every layer l with l % p < p - 1 (gemma2: p = 2, even layers;
  // gemma3: p = 6, five local layers to one global).
  int32_t swa_period = 0;
  // RoPE base of the windowed layers when it differs from rope.freq_base
  // (gemma3: 10000, as llama.cpp sets it); 0 = the same.
  float rope_base_swa = 0.0f;
};

// The families Nexus runs; nullptr for any other name.
const ArchTraits* find_arch(std::string_view name);
// "llama, mistral, qwen2, ..." for error messages.
std::string supported_arch_names();

// Tensor roles of one layer (blk.N.<name>) and of the model; kLayerTensors /
// kModelTensors (arch.cpp) give each its GGUF name and shape.
enum class LayerTensor : uint8_t {
  AttnNorm, AttnNormB, Wq, Wk, Wv, Wqkv, Bq, Bk, Bv, QNorm, KNorm, Wo, Bo, AttnPostNorm,
  FfnNorm, FfnNormB, WGate, WUp, WUpFused, BUp, WDown, BDown, FfnPostNorm,
};
enum class ModelTensor : uint8_t { TokEmbd, OutputNorm, OutputNormB, Output, RopeFreqs, RopeLong, RopeShort };

enum class Need : uint8_t { Required, Optional };
template <class Role>
struct TensorUse {
  Role role;
  Need need;
};

// The tensors a family reads. Anything else in the file is refused by name.
std::span<const TensorUse<LayerTensor>> layer_tensors(const ArchTraits& a);
std::span<const TensorUse<ModelTensor>> model_tensors(const ArchTraits& a);
// GGUF names: "attn_q.weight" (after "blk.N."), "output.weight".
const char* tensor_name(LayerTensor t);
const char* tensor_name(ModelTensor t);

// The dimensions tensor shapes derive from: n_q = n_head * head_dim (query
// width), n_kv = n_head_kv * head_dim (key = value width).
struct TensorDims {
  int64_t n_embd, n_q, n_kv, n_ff, head_dim, n_vocab, n_rot;
};
// [rows, cols] (GGUF ne = {cols, rows}); a norm weight or bias has 1 row.
struct TensorShape {
  int64_t rows, cols;
};
TensorShape tensor_shape(LayerTensor t, const TensorDims& d);
TensorShape tensor_shape(ModelTensor t, const TensorDims& d);

}  // namespace nexus
