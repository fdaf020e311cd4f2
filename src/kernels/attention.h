// Scaled dot-product attention of one query head over a run of cached keys,
// with an online softmax (Milakov & Gimelshein 2018, as in FlashAttention):
// keys are visited in chunks of kAttnChunk positions, the running maximum and
// normaliser are rescaled per chunk, and no score vector over the whole
// context is ever materialised.
//
//   out = sum_p softmax_p(scale * q . k_p) v_p,  p < n_keys
//
// q, out: [head_dim] float32. k, v: n_keys rows of a cache laid out
// [position, kv_stride] row-major; the caller points them at this head's KV
// head (GQA: query heads of a group share those rows, nothing is copied).
// head_dim <= kMaxHeadDim; n_keys >= 1.
#pragma once

#include <cstdint>

namespace nexus {

constexpr int32_t kAttnChunk = 16;
constexpr int32_t kMaxHeadDim = 256;

void attention_head(const float* q, const float* k, const float* v, int64_t kv_stride, int32_t n_keys,
                    int32_t head_dim, float scale, float* out);

}  // namespace nexus
