#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nexus {

void attention_head(const float* q, const float* k, const float* v, int64_t kv_stride, int32_t n_keys,
                    int32_t head_dim, float scale, float* out) {
  float acc[kMaxHeadDim] = {};
  float score[kAttnChunk];
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int32_t j = 0; j < count; ++j) {
      const float* kr = k + (p0 + j) * kv_stride;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int32_t i = 0; i < head_dim; ++i) s += q[i] * kr[i];
      score[j] = s * scale;
      chunk_max = std::max(chunk_max, score[j]);
    }
    if (chunk_max > m) {  // rescale what was accumulated under the old maximum
      const float correction = std::exp(m - chunk_max);  // exp(-inf) = 0 on the first chunk
      for (int32_t i = 0; i < head_dim; ++i) acc[i] *= correction;
      l *= correction;
      m = chunk_max;
    }
    for (int32_t j = 0; j < count; ++j) {
      const float w = std::exp(score[j] - m);
      const float* vr = v + (p0 + j) * kv_stride;
      l += w;
#pragma omp simd
      for (int32_t i = 0; i < head_dim; ++i) acc[i] += w * vr[i];
    }
  }
  const float inv = 1.0f / l;
  for (int32_t i = 0; i < head_dim; ++i) out[i] = acc[i] * inv;
}

}  // namespace nexus
