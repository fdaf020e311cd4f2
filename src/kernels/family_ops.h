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

// RoPE angles as ggml_rope_ext computes them (ggml-cpu ops.cpp
// ggml_rope_cache_init / rope_yarn, the parameters llama.cpp passes), in
// float64 then rounded. Pair j (j < n_rot / 2) at position pos:
//   theta_extrap = pos * freq_base^(-2j / n_rot) / factors[j]
//   theta_interp = theta_extrap * freq_scale                 (linear scaling)
//   YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension of
//   Large Language Models"; ext_factor != 0): mix = ramp(j) * ext_factor,
//   ramp(j) = 1 - clamp((j - corr_low) / max(0.001, corr_high - corr_low), 0, 1),
//   theta = theta_interp * (1 - mix) + theta_extrap * mix (pairs below
//   corr_low keep their frequency, pairs above corr_high are interpolated),
//   mscale = attn_factor * (1 + 0.1 ln(1 / freq_scale)) (the paper's
//   attention temperature sqrt(1/t), applied to q and k alike);
//   otherwise theta = theta_interp, mscale = attn_factor.
// cs[2j] = cos(theta) * mscale, cs[2j + 1] = sin(theta) * mscale.
struct RopeParams {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;           // 1 / rope.scaling.factor (linear, YaRN)
  float ext_factor = 0.0f;           // YaRN's extrapolation weight; 0 = no YaRN
  float attn_factor = 1.0f;          // cos and sin times this
  float corr_low = 0.0f, corr_high = 0.0f;  // YaRN correction dims (rope_yarn_corr_dims)
  const float* factors = nullptr;    // per-pair divisors [n_rot / 2] (rope_freqs, LongRoPE); null = all 1
};
void rope_angles_ext(int32_t pos, int32_t n_rot, const RopeParams& p, float* cs);

// YaRN's correction range (ggml_rope_yarn_corr_dims): the pair index where
// a frequency turns beta times over n_ctx_orig positions,
//   d(beta) = n_rot * ln(n_ctx_orig / (2 pi beta)) / (2 ln freq_base),
// low = max(0, floor(d(beta_fast))), high = min(n_rot - 1, ceil(d(beta_slow))).
void rope_yarn_corr_dims(int32_t n_rot, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                         float* low, float* high);

// rope_apply in the NEOX pairing: for each head, element j is rotated with
// element j + n_rot / 2 (j < n_rot / 2) by the angle in cs[2j], cs[2j + 1].
void rope_apply_neox(float* x, int32_t n_head, int32_t head_dim, int32_t n_rot, const float* cs);

}  // namespace nexus
