// AMX-INT8 prefill kernels for Q8_0 / Q4_0 (one TDPBSSD per block, 16 rows x
// 16 tokens per tile; gemm_amx.cpp), the Isa::Amx entries of their rows in the
// kernel table. Contract as GemmFn in weight_kernels.h (activations
// BlockQ8Act). Call only when cpu_features().amx_int8 (the OS granted tiles).
#pragma once

#include "kernels/act_quant.h"
#include "kernels/weight_kernels.h"

namespace nexus {

NEXUS_GEMM_KERNEL(gemm_q8_0_amx);
NEXUS_GEMM_KERNEL(gemm_q4_0_amx);

}  // namespace nexus
