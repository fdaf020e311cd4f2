// AVX2 + FMA + F16C kernels (x86-64-v3, the build's baseline).
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

}  // namespace

const GemmKernels* gemm_kernels_avx2() {
  static const GemmKernels k = make_kernels<Avx2>("avx2");
  return &k;
}

}  // namespace nexus
