// AVX-512 VNNI register-blocked prefill kernels for Q8_0 / Q4_0 (16 weight
// rows x 12 tokens per tile; gemm_prefill_avx512.cpp), the Isa::Avx512Prefill
// entries of their rows in the kernel table. Contract as GemmFn in
// weight_kernels.h (activations BlockQ8Act, ActFormat::Q8_32).
#pragma once

#include "kernels/act_quant.h"
#include "kernels/weight_kernels.h"

namespace nexus {

NEXUS_GEMM_KERNEL(gemm_q8_0_prefill_avx512);
NEXUS_GEMM_KERNEL(gemm_q4_0_prefill_avx512);

}  // namespace nexus
