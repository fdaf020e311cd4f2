// The steps of the llama forward pass (llama_model.h) that do not depend on
// where K/V are stored: embedding, attention inputs (RMSNorm, Q/K/V
// projections), attention output + SwiGLU FFN, output logits. BatchForward
// (paged KV) and the CUDA path's CPU tail run them around their own RoPE,
// K/V writes and attention.
//
// A batch is n tokens in rows of the activation buffers (row-major
// [n, width] float32); every step treats each row independently (one matmul
// per weight for all rows: matmul.h gives each row the same bits whatever n).
// Internal to src/model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nexus {

class LlamaModel;
struct LlamaConfig;
struct LlamaLayer;
class ThreadPool;

struct Activations {
  std::vector<float> x;     // residual stream       [n, n_embd]
  std::vector<float> xb;    // normed input          [n, n_embd]
  std::vector<float> xb2;   // sub-layer output      [n, n_embd]
  std::vector<float> q;     // queries               [n, n_embd]
  std::vector<float> k;     // keys                  [n, n_embd_kv]
  std::vector<float> v;     // values                [n, n_embd_kv]
  std::vector<float> att;   // attention output      [n, n_embd]
  std::vector<float> hb;    // FFN gate -> SwiGLU    [n, n_ff]
  std::vector<float> hb2;   // FFN up                [n, n_ff]

  void resize(const LlamaConfig& c, size_t n);
};

// Throws nexus::Error ("<what>: token id N out of range") for an id outside [0, n_vocab).
void check_token_ids(const LlamaConfig& c, std::span<const int32_t> tokens, const char* what);

// x[t] = tok_embd[tokens[t]].
void embed_tokens(const LlamaModel& model, std::span<const int32_t> tokens, Activations& a);

// Rows [begin, end) of the activation buffers.
struct TokenRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Rows r: xb = RMSNorm(x) * attn_norm; q, k, v = xb Wq, xb Wk, xb Wv (before
// RoPE). The products run on `pool` (a 1-thread pool runs them on the calling
// thread; two threads may then work on disjoint ranges at once).
void attention_inputs(const LlamaModel& model, const LlamaLayer& L, Activations& a, TokenRange r, ThreadPool& pool);

// Rows r: x += att Wo; then the SwiGLU feed-forward block:
// x += FFN(RMSNorm(x) * ffn_norm).
void attention_output_and_ffn(const LlamaModel& model, const LlamaLayer& L, Activations& a, TokenRange r,
                              ThreadPool& pool);

// logits[i] = RMSNorm(x[rows[i]]) * output_norm Wout, [rows.size(), n_vocab].
// rows must be increasing (row i of xb is overwritten from row rows[i] >= i).
void output_logits(const LlamaModel& model, Activations& a, std::span<const int32_t> rows, std::vector<float>& logits,
                   ThreadPool& pool);

}  // namespace nexus
