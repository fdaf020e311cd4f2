// AVX-512 VNNI kernels: the int8 products in one vpdpbusd; float weights in
// gemm_float_avx512.cpp (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni;
// see src/CMakeLists.txt).
#include "kernels/x86/gemm_body.h"
#include "kernels/x86/gemm_float_avx512.h"

namespace nexus {
namespace {

struct Avx512Vnni {
  static __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

}  // namespace

const GemmKernels* gemm_kernels_avx512_vnni() {
  static const GemmKernels k{"avx512_vnni",
                             quant_rows<Q8_0Weights<Avx512Vnni>>,
                             quant_rows<Q4_0Weights<Avx512Vnni>>,
                             gemm_f32_avx512,
                             gemm_f16_avx512,
                             gemm_bf16_avx512};
  return &k;
}

}  // namespace nexus
