// The steps of a forward pass around the layers (model/layer.h), on the
// CPU: activation buffers, embedding, output logits, RoPE angle tables.
// BatchForward (paged KV) and the CUDA path's CPU tail share them.
//
// A batch is n tokens in rows of the activation buffers (row-major
// [n, width] float32); every step treats each row independently (one matmul
// per weight for all rows: matmul.h gives each row the same bits whatever n).
// Internal to src/model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/layer.h"

namespace nexus {

class LlamaModel;
struct LlamaConfig;
class ThreadPool;

struct Activations {
  std::vector<float> x;     // residual stream       [n, n_embd]
  std::vector<float> xb;    // normed input          [n, n_embd]
  std::vector<float> xb2;   // sub-layer output      [n, n_embd]
  std::vector<float> q;     // queries               [n, n_embd_q]
  std::vector<float> k;     // keys                  [n, n_embd_kv]
  std::vector<float> v;     // values                [n, n_embd_kv]
  std::vector<float> att;   // attention output      [n, n_embd_q]
  std::vector<float> hb;    // FFN gate -> GLU       [n, n_ff]
  std::vector<float> hb2;   // FFN up                [n, n_ff]

  void resize(const LlamaConfig& c, size_t n);
  // Pointers at row `t` (forward_layer's view of rows [t, ...)).
  LayerBuffers rows_from(const LlamaConfig& c, int64_t t);
};

// Rows [begin, end) of the activation buffers.
struct TokenRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Throws nexus::Error ("<what>: token id N out of range") for an id outside [0, n_vocab).
void check_token_ids(const LlamaConfig& c, std::span<const int32_t> tokens, const char* what);

// x[t] = tok_embd[tokens[t]] (times sqrt(n_embd) for families that scale it).
void embed_tokens(const LlamaModel& model, std::span<const int32_t> tokens, Activations& a);

// out[0, n_embd) = the output norm of x[0, n_embd) (RMSNorm or LayerNorm as
// the family does, with output_norm's weights): the final hidden state.
void output_norm(const LlamaModel& model, const float* x, float* out);

// logits[i] = norm(x[rows[i]]) * output_norm Wout (soft-capped where the
// family does), [rows.size(), n_vocab]. rows must be increasing (row i of
// xb is overwritten from row rows[i] >= i).
void output_logits(const LlamaModel& model, Activations& a, std::span<const int32_t> rows, std::vector<float>& logits,
                   ThreadPool& pool);

}  // namespace nexus
