// Element-wise and per-row operations that model families beyond llama add
// to ops.h's (model/arch.h says which family uses which), float32.
#pragma once

#include <cstdint>

namespace nexus {

// LayerNorm (Ba et al. 2016): out[i] = (x[i] - mean) / sqrt(var + eps) * w[i]
// (+ b[i] when b is not null), i < n; mean and variance in float64. out may alias x.
void layernorm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps);

// x[r * n + i] += b[i] for r < n_rows, i < n (a bias on every row).
void add_bias_rows(float* x, const float* b, int64_t n_rows, int64_t n);

// GELU, tanh approximation (Hendrycks & Gimpel 2016), as ggml and the
// gemma / starcoder2 reference code use it: x[i] = gelu(x[i]), i < n.
void gelu(float* x, int64_t n);
// GEGLU (Shazeer 2020): gate[i] = gelu(gate[i]) * up[i], i < n.
void geglu(float* gate, const float* up, int64_t n);

// Soft-capping (gemma2): x[i] = cap * tanh(x[i] / cap), i < n.
void softcap(float* x, int64_t n, float cap);

// RoPE angles with the scalings of rope_angles (ops.h) generalised: pair j
// (j < n_rot / 2) turns by pos * freq_base^(-2j / n_rot) * freq_scale /
// factors[j] (factors may be null: all 1). cs[2j] = cos, cs[2j + 1] = sin.
void rope_angles_scaled(int32_t pos, int32_t n_rot, float freq_base, float freq_scale, const float* factors,
                        float* cs);

// rope_apply in the NEOX pairing: for each head, element j is rotated with
// element j + n_rot / 2 (j < n_rot / 2) by the angle in cs[2j], cs[2j + 1].
void rope_apply_neox(float* x, int32_t n_head, int32_t head_dim, int32_t n_rot, const float* cs);

}  // namespace nexus
