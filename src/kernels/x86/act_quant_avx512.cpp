// quantize_act_q8 with AVX-512: one block of 32 values is two zmm.
//
// Bit for bit the portable version's results (act_quant.cpp): max |x| is
// exact in any order, d = amax / 127 and 1 / d are the same IEEE operations,
// vcvtps2dq rounds x * (1 / d) to nearest even as nearbyint does under the
// default rounding mode, the int32 sum is exact and d's fp16 rounding is the
// same function. Why: at 128 tokens x 2048 columns the scalar loop took ~5%
// of a prefill step (bench-model pp128, perf), on the calling thread.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// (src/CMakeLists.txt); matmul() calls it only when CPUID reports AVX-512.
#include <immintrin.h>

#include "kernels/act_quant.h"
#include "kernels/quant_blocks.h"

namespace nexus {

void quantize_act_q8_avx512(const float* x, BlockQ8Act* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * 32);
    const __m512 v1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16), _mm512_cvtsepi32_epi8(q1));
    out[b].d = fp16_to_fp32(fp32_to_fp16(d));
    out[b].qsum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

}  // namespace nexus
