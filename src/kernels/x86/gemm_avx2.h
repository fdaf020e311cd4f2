// AVX2 + FMA + F16C kernels (x86-64-v3, the build's baseline; gemm_avx2.cpp
// over gemm_body.h), the Isa::Avx2 entries of their rows in the kernel table.
// Contract as GemmFn in weight_kernels.h: Q8_0 / Q4_0 take BlockQ8Act
// activations, the float types float32.
#pragma once

#include "kernels/weight_kernels.h"

namespace nexus {

NEXUS_GEMM_KERNEL(gemm_q8_0_avx2);
NEXUS_GEMM_KERNEL(gemm_q4_0_avx2);
NEXUS_GEMM_KERNEL(gemm_f32_avx2);
NEXUS_GEMM_KERNEL(gemm_f16_avx2);
NEXUS_GEMM_KERNEL(gemm_bf16_avx2);

}  // namespace nexus
