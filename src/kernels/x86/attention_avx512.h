// The AVX-512 attention kernels behind attention_heads16_hd4_paged* of
// kernels/attention.h (same contract; internal to kernels/: call those,
// which check the CPU first).
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace nexus {

void attention_heads16_hd4_paged_avx512(const float* q, const PagedKv& kv, int32_t n_keys, float scale, float* out);
void attention_heads16_hd4_paged_f16_avx512(const float* q, const PagedKv& kv, int32_t n_keys, float scale,
                                            float* out);

}  // namespace nexus
