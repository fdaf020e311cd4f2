// Element-wise and per-row operations of the llama forward pass, float32.
#pragma once

#include <cstdint>

namespace nexus {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], i < n  (Zhang & Sennrich 2019).
// out may alias x.
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);

// Rotary position embedding (Su et al. 2021) in the GGUF llama ("normal")
// layout: for each head, pairs (2i, 2i+1) with i < n_rot/2 are rotated by
// pos * freq_base^(-2i/n_rot). x: [n_head, head_dim], in place.
void rope(float* x, int32_t n_head, int32_t head_dim, int32_t n_rot, int32_t pos, float freq_base);

// The same rotation in two halves, so a batch computes each token's angles
// once for all layers and heads: rope_angles writes cs[2j] = cos and
// cs[2j + 1] = sin of pos * freq_base^(-2j/n_rot) for j < n_rot/2 (n_rot
// floats), rope_apply rotates x with them. Same bits as rope().
void rope_angles(int32_t pos, int32_t n_rot, float freq_base, float* cs);
void rope_apply(float* x, int32_t n_head, int32_t head_dim, int32_t n_rot, const float* cs);

// In-place softmax over x[0..n).
void softmax(float* x, int64_t n);

// SwiGLU (Shazeer 2020): gate[i] = silu(gate[i]) * up[i], i < n.
void swiglu(float* gate, const float* up, int64_t n);

}  // namespace nexus
