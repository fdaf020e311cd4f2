#include "kernels/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/fast_exp.h"

namespace nexus {
namespace {

// RoPE's angle of pair i/2 at `pos`, rounded to float as cos and sin.
void rope_cos_sin(int32_t pos, int32_t i, int32_t n_rot, float freq_base, float& c, float& s) {
  const double theta = pos * std::pow(static_cast<double>(freq_base), -static_cast<double>(i) / n_rot);
  c = static_cast<float>(std::cos(theta));
  s = static_cast<float>(std::sin(theta));
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  // Accumulate in double: the scale is one number per row, cheap to get right.
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_angles(int32_t pos, int32_t n_rot, float freq_base, float* cs) {
  for (int32_t i = 0; i < n_rot; i += 2) rope_cos_sin(pos, i, n_rot, freq_base, cs[i], cs[i + 1]);
}

void rope_apply(float* x, int32_t n_head, int32_t head_dim, int32_t n_rot, const float* cs) {
  for (int32_t h = 0; h < n_head; ++h)
    for (int32_t i = 0; i < n_rot; i += 2) {
      float* v = x + h * head_dim + i;
      // Explicit fma: the compiler may not contract differently per caller.
      const float c = cs[i], s = cs[i + 1], v0 = v[0], v1 = v[1];
      v[0] = std::fma(v0, c, -(v1 * s));
      v[1] = std::fma(v0, s, v1 * c);
    }
}

void rope(float* x, int32_t n_head, int32_t head_dim, int32_t n_rot, int32_t pos, float freq_base) {
  for (int32_t i = 0; i < n_rot; i += 2) {
    float cs[2];
    rope_cos_sin(pos, i, n_rot, freq_base, cs[0], cs[1]);
    for (int32_t h = 0; h < n_head; ++h) rope_apply(x + h * head_dim + i, 1, head_dim, 2, cs);
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// silu(g) = g / (1 + e^-g). With e = e^-|g| (exp_nonpos, 8 lanes at a time):
// g / (1 + e) for g >= 0 and g e / (1 + e) for g < 0, the same value
// without overflow for large |g|; relative error ~1e-6 (fast_exp.h).
void swiglu(float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp_nonpos8(_mm256_or_ps(g, sign));  // e^-|g|
    const __m256 num = _mm256_blendv_ps(g, _mm256_mul_ps(g, e), g);  // sign bit of g selects g e
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    const float e = exp_nonpos(-std::fabs(g));
    gate[i] = (g < 0 ? g * e : g) / (1.0f + e) * up[i];
  }
}

}  // namespace nexus
