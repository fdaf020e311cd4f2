// AVX-512 VNNI kernel table (decode): Q8_0 / Q4_0 in gemm_quant_avx512.cpp
// (two blocks per 512-bit vpdpbusd), float weights in gemm_float_avx512.cpp
// (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni; see
// src/CMakeLists.txt).
#include "kernels/gemm_kernels.h"
#include "kernels/x86/gemm_float_avx512.h"
#include "kernels/x86/gemm_quant_avx512.h"

namespace nexus {

const GemmKernels* gemm_kernels_avx512_vnni() {
  static const GemmKernels k{"avx512_vnni",
                             gemm_q8_0_avx512,
                             gemm_q4_0_avx512,
                             gemm_f32_avx512,
                             gemm_f16_avx512,
                             gemm_bf16_avx512};
  return &k;
}

}  // namespace nexus
