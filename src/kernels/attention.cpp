#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/fast_exp.h"

namespace nexus {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Scores of `count` (<= 16) keys, scaled; lanes past count are -inf.
// Generic: any head_dim.
void scores_generic(const float* q, const float* k, int64_t kv_stride, int32_t count, int32_t head_dim, float scale,
                    float* score) {
  for (int32_t j = 0; j < kAttnChunk; ++j) {
    if (j >= count) {
      score[j] = kNegInf;
      continue;
    }
    const float* kr = k + j * kv_stride;
    float s = 0.0f;
    for (int32_t i = 0; i < head_dim; ++i) s += q[i] * kr[i];
    score[j] = s * scale;
  }
}

// head_dim a multiple of 8: each key's products stay in 8 lanes, then eight
// keys' lanes are summed at once with a horizontal-add tree.
void scores_avx2(const float* q, const float* k, int64_t kv_stride, int32_t count, int32_t head_dim, float scale,
                 float* score) {
  for (int32_t g = 0; g < kAttnChunk; g += 8) {
    __m256 v[8];
    for (int32_t jj = 0; jj < 8; ++jj) {
      v[jj] = _mm256_setzero_ps();
      if (g + jj >= count) continue;
      const float* kr = k + (g + jj) * kv_stride;
      for (int32_t i = 0; i < head_dim; i += 8)
        v[jj] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kr + i), v[jj]);
    }
    const __m256 h0123 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 h4567 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                                      _mm256_permute2f128_ps(h0123, h4567, 0x31));
    _mm256_storeu_ps(score + g, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
    for (int32_t jj = 0; jj < 8; ++jj)
      if (g + jj >= count) score[g + jj] = kNegInf;
  }
}

}  // namespace

void attention_head(const float* q, const float* k, const float* v, int64_t kv_stride, int32_t n_keys,
                    int32_t head_dim, float scale, float* out) {
  alignas(32) float acc[kMaxHeadDim] = {};
  alignas(32) float score[kAttnChunk];
  const bool simd = head_dim % 8 == 0;
  float m = kNegInf, l = 0.0f;
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    const float* kc = k + p0 * kv_stride;
    if (simd) scores_avx2(q, kc, kv_stride, count, head_dim, scale, score);
    else scores_generic(q, kc, kv_stride, count, head_dim, scale, score);
    float chunk_max = kNegInf;
    for (int32_t j = 0; j < kAttnChunk; ++j) chunk_max = std::max(chunk_max, score[j]);
    if (chunk_max > m) {  // rescale what was accumulated under the old maximum
      const float correction = exp_nonpos(m - chunk_max);  // exp(-inf) = 0 on the first chunk
      for (int32_t i = 0; i < head_dim; ++i) acc[i] *= correction;
      l *= correction;
      m = chunk_max;
    }
    const __m256 vm = _mm256_set1_ps(m);  // exp(-inf) = 0 past count
    for (int32_t j = 0; j < kAttnChunk; j += 8)
      _mm256_store_ps(score + j, exp_nonpos8(_mm256_sub_ps(_mm256_load_ps(score + j), vm)));
    for (int32_t j = 0; j < count; ++j) l += score[j];
    const float* vc = v + p0 * kv_stride;
    if (simd) {
      for (int32_t i = 0; i < head_dim; i += 8) {  // one accumulator in a register per 8 dims
        __m256 a = _mm256_load_ps(acc + i);
        for (int32_t j = 0; j < count; ++j)
          a = _mm256_fmadd_ps(_mm256_set1_ps(score[j]), _mm256_loadu_ps(vc + j * kv_stride + i), a);
        _mm256_store_ps(acc + i, a);
      }
    } else {
      for (int32_t j = 0; j < count; ++j)
        for (int32_t i = 0; i < head_dim; ++i) acc[i] += score[j] * vc[j * kv_stride + i];
    }
  }
  const float inv = 1.0f / l;
  for (int32_t i = 0; i < head_dim; ++i) out[i] = acc[i] * inv;
}

}  // namespace nexus
