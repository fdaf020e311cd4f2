// CpuOps: the CPU's operations for forward_layer (model/layer.h), over host
// activations, products on a ThreadPool (kernels/matmul.h), element-wise
// steps in kernels/ops.h and kernels/family_ops.h. The attention step is the
// caller's (BatchForward, CpuTail: their caches differ), given as a callable
// attend(layer, q, k, v, out, n).
// Internal to src/model.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "kernels/family_ops.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "model/layer.h"
#include "model/llama_config.h"

namespace nexus {

class ThreadPool;

// Every token's RoPE angles ([n_tokens][n_rot]: rope_angles layout), once
// per step for all layers: the global layers' and, when they differ, the
// windowed layers' (gemma3's local base).
struct RopeTables {
  const float* global = nullptr;
  const float* swa = nullptr;  // null: the global angles serve every layer
};

// Fills angles for positions pos[0..n) into cs ([n][n_rot]) with the
// model's RoPE (base, linear or YaRN scaling, attention factor, per-frequency
// factors or none: kernels/family_ops.h rope_angles_ext); swa: the windowed
// layers' base, unscaled. Llama without factors or scaling gets rope_angles'
// exact bits. factors: LlamaModel::rope_factors_for(n_ctx).
void rope_tables(const LlamaConfig& c, const float* factors, const int32_t* pos, int64_t n, bool swa, float* cs);

template <class Attend>
struct CpuOps {
  using Weight = WeightView;
  const LlamaConfig& c;
  ThreadPool& pool;
  RopeTables rope_cs;  // at row 0 of this call's tokens
  Attend attend;

  void rmsnorm(float* out, const float* x, const WeightView& w, int64_t rows, int64_t width, float eps) {
    for (int64_t t = 0; t < rows; ++t) nexus::rmsnorm(&out[t * width], &x[t * width], w.f32(), width, eps);
  }
  void layernorm(float* out, const float* x, const WeightView& w, const WeightView& b, int64_t rows, int64_t width,
                 float eps) {
    for (int64_t t = 0; t < rows; ++t) nexus::layernorm(&out[t * width], &x[t * width], w.f32(), b.f32(), width, eps);
  }
  void matmul(std::initializer_list<Product<WeightView>> ps, const float* x, int64_t n) {
    if (ps.size() == 1) return nexus::matmul(*ps.begin()->w, x, ps.begin()->out, n, pool);
    MatmulOut outs[kMaxSharedOutputs];
    size_t i = 0;
    for (const Product<WeightView>& p : ps) outs[i++] = {p.w, p.out};
    matmul_shared_input(std::span<const MatmulOut>(outs, i), x, n, pool);
  }
  void add_bias(float* x, const WeightView& b, int64_t rows, int64_t width) { add_bias_rows(x, b.f32(), rows, width); }
  void rope(float* x, int32_t n_heads, int32_t layer, int64_t n) {
    const float* cs = rope_cs.swa && c.is_swa(layer) ? rope_cs.swa : rope_cs.global;
    const int64_t width = static_cast<int64_t>(n_heads) * c.head_dim;
    for (int64_t t = 0; t < n; ++t) {
      if (c.traits->rope == RopeType::Neox) rope_apply_neox(&x[t * width], n_heads, c.head_dim, c.n_rot, &cs[t * c.n_rot]);
      else rope_apply(&x[t * width], n_heads, c.head_dim, c.n_rot, &cs[t * c.n_rot]);
    }
  }
  void attention(int32_t layer, const float* q, const float* k, const float* v, float* out, int64_t n) {
    attend(layer, q, k, v, out, n);
  }
  void glu(FfnAct a, float* gate, const float* up, int64_t count) {
    if (a == FfnAct::Silu) swiglu(gate, up, count);
    else geglu(gate, up, count);
  }
  void act(FfnAct a, float* x, int64_t count) {
    if (a == FfnAct::Gelu) return gelu(x, count);
    for (int64_t i = 0; i < count; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));  // SiLU (no family here uses it plain)
  }
  void add(float* x, const float* y, int64_t count) {
    for (int64_t i = 0; i < count; ++i) x[i] += y[i];
  }
};

template <class Attend>
CpuOps<Attend> cpu_ops(const LlamaConfig& c, ThreadPool& pool, RopeTables cs, Attend attend) {
  return CpuOps<Attend>{c, pool, cs, attend};
}

}  // namespace nexus
