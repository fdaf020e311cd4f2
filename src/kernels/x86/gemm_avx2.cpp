// AVX2 + FMA + F16C kernels (x86-64-v3, the build's baseline): gemm_body.h
// with the 256-bit u8 x s8 dot product.
#include "kernels/x86/gemm_avx2.h"

#include "kernels/x86/gemm_body.h"

namespace nexus {
namespace {

struct Avx2 {
  // u8 x s8 pairs -> int16, then pairs -> int32. The int16 step cannot
  // saturate here: u is |w| <= 127 or a nibble <= 15, so 2 * 127 * 128 < 2^15.
  static __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};

const BlockQ8Act* act(const void* x) { return static_cast<const BlockQ8Act*>(x); }
const float* act_f32(const void* x) { return static_cast<const float*>(x); }

}  // namespace

NEXUS_GEMM_KERNEL(gemm_q8_0_avx2) {
  quant_rows<Q8_0Weights<Avx2>>(w, row_bytes, r0, r1, n_cols / 32, act(x), n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_q4_0_avx2) {
  quant_rows<Q4_0Weights<Avx2>>(w, row_bytes, r0, r1, n_cols / 32, act(x), n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_f32_avx2) { float_rows<LoadF32>(w, row_bytes, r0, r1, n_cols, act_f32(x), n_tokens, y, ldy); }
NEXUS_GEMM_KERNEL(gemm_f16_avx2) { float_rows<LoadF16>(w, row_bytes, r0, r1, n_cols, act_f32(x), n_tokens, y, ldy); }
NEXUS_GEMM_KERNEL(gemm_bf16_avx2) { float_rows<LoadBF16>(w, row_bytes, r0, r1, n_cols, act_f32(x), n_tokens, y, ldy); }

}  // namespace nexus
