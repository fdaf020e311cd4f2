// AVX-512 VNNI kernels: the int8 products in one vpdpbusd (compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni; see src/CMakeLists.txt).
#include "kernels/x86/gemm_body.h"

namespace nexus {
namespace {

struct Avx512Vnni {
  static __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

}  // namespace

const GemmKernels* gemm_kernels_avx512_vnni() {
  static const GemmKernels k = make_kernels<Avx512Vnni>("avx512_vnni");
  return &k;
}

}  // namespace nexus
