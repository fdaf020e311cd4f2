// attention_head_paged (attention.h) for the layers of families that need
// more than the llama kernel: keys from a first position on (a sliding
// window, Beltagy et al. 2020 / Mistral) and soft-capped scores (gemma2:
// s -> cap * tanh(s / cap), Gemma 2 report). Scalar online softmax per key,
// any head_dim <= kMaxHeadDim; same PagedKv addressing as the llama kernels.
//
//   out = sum_{first <= p < n_keys} softmax_p(cap(scale * q . k_p)) v_p
//
// elem: how the cache stores K/V (float32, fp16, or Q8_0 with kv.scales and
// kv.k_elem0 / v_elem0 set). 0 <= first < n_keys.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace nexus {

void attention_head_paged_window(const float* q, const PagedKv& kv, KvElem elem, int32_t first, int32_t n_keys,
                                 int32_t head_dim, float scale, float softcap, float* out);

}  // namespace nexus
