// forward_layer: what one transformer layer computes, for every family
// (model/arch.h) and every backend. It reads like the math; the backend's
// `Ops` say how and where each step runs (CpuOps: model/cpu_ops.h for
// BatchForward and CpuTail; CudaOps: model/cuda/cuda_forward.cpp).
//
//   h = norm(x) * attn_norm (+ attn_norm_b)           RMSNorm, or LayerNorm with bias
//   q, k, v = h Wq (+ bq), h Wk (+ bk), h Wv (+ bv)    attn_q/k/v, or row views of attn_qkv
//   q, k = RMSNorm(q_head) * q_norm, ... per head      qwen3, gemma3
//   q, k = RoPE(q), RoPE(k)                            NORM or NEOX pairing, factors, scaling
//   a = softmax(cap(scale q k^T), causal, window) v    the backend's paged KV cache
//   o = a Wo (+ bo);  o = RMSNorm(o) * attn_post_norm  gemma2/3
//   x += o
//   h = norm(x) * ffn_norm (+ ffn_norm_b)
//   f = act(h Wgate) * (h Wup)   or   act(h Wup + b_up)    gated (SwiGLU, GEGLU) or plain MLP
//   o = f Wdown (+ b_down);  o = RMSNorm(o) * ffn_post_norm
//   x += o
//
// An Ops type provides, over its own float32 activation pointers (row-major,
// one row per token of the call, n rows):
//   using Weight;                                      LayerWeightsT<Weight> holds the tensors
//   rmsnorm(out, x, w, rows, width, eps)               out may alias x
//   layernorm(out, x, w, b, rows, width, eps)
//   matmul({{&W, out}, ...}, x, n)                     out = x W^T for each W (one shared input)
//   add_bias(x, b, rows, width)
//   rope(x, n_heads, layer, n)                         each token at its own position
//   attention(layer, q, k, v, out, n)                  writes K/V, then attends (window, soft-cap)
//   glu(act, gate, up, count), act(act, x, count), add(x, y, count)
#pragma once

#include <cstdint>
#include <initializer_list>

#include "model/llama_config.h"
#include "model/llama_model.h"

namespace nexus {

// One product of a matmul call.
template <class W>
struct Product {
  const W* w;
  float* out;
};

// Row 0 of each activation buffer of the call's tokens.
struct LayerBuffers {
  float* x;    // residual stream      [n, n_embd]
  float* xb;   // normed input         [n, n_embd]
  float* xb2;  // sub-layer output     [n, n_embd]
  float* q;    // queries              [n, n_embd_q]
  float* k;    // keys                 [n, n_embd_kv]
  float* v;    // values               [n, n_embd_kv]
  float* att;  // attention output     [n, n_embd_q]
  float* hb;   // FFN gate / hidden    [n, n_ff]
  float* hb2;  // FFN up               [n, n_ff]
};

template <class Ops, class W>
void norm(Ops& ops, const LlamaConfig& c, float* out, const float* x, const W& w, const W& b, int64_t rows) {
  if (c.traits->norm == NormType::Layer) ops.layernorm(out, x, w, b, rows, c.n_embd, c.rms_eps);
  else ops.rmsnorm(out, x, w, rows, c.n_embd, c.rms_eps);
}

template <class Ops, class W>
void bias(Ops& ops, float* x, const W& b, int64_t rows, int64_t width) {
  if (has(b)) ops.add_bias(x, b, rows, width);
}

template <class Ops>
void forward_layer(Ops& ops, const LlamaConfig& c, const LayerWeightsT<typename Ops::Weight>& L, int32_t layer,
                   const LayerBuffers& b, int64_t n) {
  const int64_t E = c.n_embd, Q = c.n_embd_q(), KV = c.n_embd_kv(), F = c.n_ff;

  // Attention.
  norm(ops, c, b.xb, b.x, L.attn_norm, L.attn_norm_b, n);
  ops.matmul({{&L.wq, b.q}, {&L.wk, b.k}, {&L.wv, b.v}}, b.xb, n);
  bias(ops, b.q, L.bq, n, Q);
  bias(ops, b.k, L.bk, n, KV);
  bias(ops, b.v, L.bv, n, KV);
  if (has(L.q_norm)) ops.rmsnorm(b.q, b.q, L.q_norm, n * c.n_head, c.head_dim, c.rms_eps);
  if (has(L.k_norm)) ops.rmsnorm(b.k, b.k, L.k_norm, n * c.n_head_kv, c.head_dim, c.rms_eps);
  ops.rope(b.q, c.n_head, layer, n);
  ops.rope(b.k, c.n_head_kv, layer, n);
  ops.attention(layer, b.q, b.k, b.v, b.att, n);
  ops.matmul({{&L.wo, b.xb2}}, b.att, n);
  bias(ops, b.xb2, L.bo, n, E);
  if (has(L.attn_post_norm)) ops.rmsnorm(b.xb2, b.xb2, L.attn_post_norm, n, E, c.rms_eps);
  ops.add(b.x, b.xb2, n * E);

  // Feed-forward.
  norm(ops, c, b.xb, b.x, L.ffn_norm, L.ffn_norm_b, n);
  if (has(L.w_gate)) {
    ops.matmul({{&L.w_gate, b.hb}, {&L.w_up, b.hb2}}, b.xb, n);
    ops.glu(c.traits->act, b.hb, b.hb2, n * F);
  } else {
    ops.matmul({{&L.w_up, b.hb}}, b.xb, n);
    bias(ops, b.hb, L.b_up, n, F);
    ops.act(c.traits->act, b.hb, n * F);
  }
  ops.matmul({{&L.w_down, b.xb2}}, b.hb, n);
  bias(ops, b.xb2, L.b_down, n, E);
  if (has(L.ffn_post_norm)) ops.rmsnorm(b.xb2, b.xb2, L.ffn_post_norm, n, E, c.rms_eps);
  ops.add(b.x, b.xb2, n * E);
}

}  // namespace nexus
