// Float-weight (F32, F16, BF16) AVX-512 kernels, the Isa::Avx512 entries of
// their rows in the kernel table: the GemmFn contract of weight_kernels.h
// with float32 activations [n_tokens, n_cols] (ActFormat::F32).
#pragma once

#include "kernels/weight_kernels.h"

namespace nexus {

NEXUS_GEMM_KERNEL(gemm_f32_avx512);
NEXUS_GEMM_KERNEL(gemm_f16_avx512);
NEXUS_GEMM_KERNEL(gemm_bf16_avx512);

}  // namespace nexus
