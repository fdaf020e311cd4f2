// LlamaModel: the weights of a llama-family model, viewed in place in the
// GGUF mapping (no copy), and its forward pass.
//
// Architecture (Touvron et al. 2023, "LLaMA"; GGUF tensor names in brackets):
//   x = tok_embd[token]                                   [token_embd.weight]
//   per layer l:
//     h = RMSNorm(x) * attn_norm                          [blk.l.attn_norm.weight]
//     q, k, v = h Wq, h Wk, h Wv; RoPE(q), RoPE(k)        [blk.l.attn_{q,k,v}.weight]
//     x += softmax(q k^T / sqrt(head_dim), causal) v Wo   [blk.l.attn_output.weight]
//     h = RMSNorm(x) * ffn_norm                           [blk.l.ffn_norm.weight]
//     x += (SiLU(h Wgate) * (h Wup)) Wdown  (SwiGLU)      [blk.l.ffn_{gate,up,down}.weight]
//   logits = RMSNorm(x) * output_norm Wout                [output_norm.weight, output.weight
//                                                          or token_embd.weight when tied]
// RoPE follows GGUF llama conventions: Q/K weights were permuted by the
// converter so that rotation pairs are adjacent values (2i, 2i+1).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/tensor.h"
#include "model/llama_config.h"

namespace nexus {

class GgufFile;

struct LlamaLayer {
  WeightView attn_norm, wq, wk, wv, wo;
  WeightView ffn_norm, w_gate, w_up, w_down;
};

class LlamaModel {
 public:
  // Binds the tensors of `gguf` (which must outlive the model); F32 matrices
  // are also repacked into panels when the CPU has the kernel. Throws
  // nexus::Error for a missing tensor, a shape that disagrees with the
  // config, or a weight type the kernels do not support.
  explicit LlamaModel(const GgufFile& gguf);

  const LlamaConfig& config() const { return config_; }
  const WeightView& tok_embd() const { return tok_embd_; }
  const WeightView& output_norm() const { return output_norm_; }
  const WeightView& output() const { return output_; }
  const std::vector<LlamaLayer>& layers() const { return layers_; }
  // Bytes of weights read per decoded token (for bandwidth accounting).
  uint64_t weight_bytes() const;

 private:
  LlamaConfig config_;
  WeightView tok_embd_, output_norm_, output_;
  std::vector<LlamaLayer> layers_;
  // F32 matrices repacked for matmul (kernels/f32_panels.h); the views'
  // `panels` point into these. Shared, so a copied model stays valid.
  std::vector<std::shared_ptr<const float[]>> panels_;
};

}  // namespace nexus
