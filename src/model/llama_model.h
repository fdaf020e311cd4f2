// LlamaModel: the weights of a model of any supported family (model/arch.h),
// viewed in place in the GGUF mapping (no copy), bound by the family's
// tensor table. The name is from when llama was the only family.
//
// What a layer computes from them is model/layer.h (forward_layer); shapes
// below are math shapes [rows, cols] (GGUF ne = {cols, rows}); optional
// tensors a family or file lacks are empty views (data == nullptr).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "model/llama_config.h"

namespace nexus {

class GgufFile;

// One layer's tensors, over any weight handle with a `data` pointer (the
// host WeightView here, a device copy in the CUDA backend).
template <class W>
struct LayerWeightsT {
  W attn_norm, attn_norm_b;  // [n_embd] (bias: LayerNorm families)
  W wq, wk, wv;              // [n_embd_q, n_embd], [n_embd_kv, n_embd] x2 (row views of attn_qkv when fused)
  W bq, bk, bv;              // [n_embd_q], [n_embd_kv] x2 (qwen2, starcoder2)
  W q_norm, k_norm;          // [head_dim]: RMSNorm of each head before RoPE (qwen3, gemma3)
  W wo, bo;                  // [n_embd, n_embd_q], [n_embd]
  W attn_post_norm;          // [n_embd]: RMSNorm of the attention output (gemma2/3)
  W ffn_norm, ffn_norm_b;    // [n_embd]
  W w_gate, w_up;            // [n_ff, n_embd] (row views of a fused ffn_up: gate rows first)
  W b_up;                    // [n_ff]
  W w_down, b_down;          // [n_embd, n_ff], [n_embd]
  W ffn_post_norm;           // [n_embd]

  // Every member, for loops over the tensors (upload, byte counts).
  static constexpr std::array<W LayerWeightsT::*, 21> all() {
    return {&LayerWeightsT::attn_norm, &LayerWeightsT::attn_norm_b, &LayerWeightsT::wq,
            &LayerWeightsT::wk,        &LayerWeightsT::wv,          &LayerWeightsT::bq,
            &LayerWeightsT::bk,        &LayerWeightsT::bv,          &LayerWeightsT::q_norm,
            &LayerWeightsT::k_norm,    &LayerWeightsT::wo,          &LayerWeightsT::bo,
            &LayerWeightsT::attn_post_norm, &LayerWeightsT::ffn_norm, &LayerWeightsT::ffn_norm_b,
            &LayerWeightsT::w_gate,    &LayerWeightsT::w_up,        &LayerWeightsT::b_up,
            &LayerWeightsT::w_down,    &LayerWeightsT::b_down,      &LayerWeightsT::ffn_post_norm};
  }
  // The matrices (products), in the order a layer uses them.
  static constexpr std::array<W LayerWeightsT::*, 7> matrices() {
    return {&LayerWeightsT::wq, &LayerWeightsT::wk, &LayerWeightsT::wv, &LayerWeightsT::wo,
            &LayerWeightsT::w_gate, &LayerWeightsT::w_up, &LayerWeightsT::w_down};
  }
};

template <class W>
bool has(const W& w) {
  return w.data != nullptr;
}

using LlamaLayer = LayerWeightsT<WeightView>;

class LlamaModel {
 public:
  // Reads the config, then binds every tensor of the family's table (F32
  // matrices are also repacked into panels when the CPU has the kernel).
  // Throws nexus::Error naming the tensor for a missing required tensor, a
  // shape that disagrees with the config, a weight type the kernels do not
  // support, or a tensor the family does not use (never silently ignored).
  explicit LlamaModel(const GgufFile& gguf);

  const LlamaConfig& config() const { return config_; }
  const WeightView& tok_embd() const { return tok_embd_; }
  const WeightView& output_norm() const { return output_norm_; }
  const WeightView& output_norm_b() const { return output_norm_b_; }  // LayerNorm families
  const WeightView& output() const { return output_; }
  // Per-frequency RoPE divisors, [n_rot / 2] F32 (Llama 3.1+ rope_freqs); empty when absent.
  const WeightView& rope_factors() const { return rope_factors_; }
  // phi3 LongRoPE divisors (rope_factors_long / _short.weight), [n_rot / 2] F32; empty when absent.
  const WeightView& rope_factors_long() const { return rope_long_; }
  const WeightView& rope_factors_short() const { return rope_short_; }
  // The divisors RoPE uses in a context of n_ctx positions per sequence, as
  // llama.cpp chooses them (llama_model::get_rope_factors): rope_freqs when
  // present, else the long factors when n_ctx > rope.scaling.original_context_length,
  // else the short ones; null when the chosen set is absent.
  const float* rope_factors_for(int32_t n_ctx) const;
  const std::vector<LlamaLayer>& layers() const { return layers_; }
  // Bytes of weights read per decoded token (for bandwidth accounting).
  uint64_t weight_bytes() const;
  // One line for `nexus info`: the architecture and what of it this file
  // uses ("qwen2: 2 layers, 4 heads of 64 (2 KV), NEOX RoPE, RMSNorm, SwiGLU
  // FFN, Q/K/V biases, untied output").
  std::string describe() const;

 private:
  LlamaConfig config_;
  WeightView tok_embd_, output_norm_, output_norm_b_, output_, rope_factors_, rope_long_, rope_short_;
  std::vector<LlamaLayer> layers_;
  bool fused_qkv_ = false, fused_gate_up_ = false;  // bound from attn_qkv / a gate+up ffn_up (describe())
  // F32 matrices repacked for matmul (kernels/f32_panels.h); the views'
  // `panels` point into these. Shared, so a copied model stays valid.
  std::vector<std::shared_ptr<const float[]>> panels_;
};

}  // namespace nexus
