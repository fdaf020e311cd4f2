// AVX-512 VNNI decode kernels for Q8_0 / Q4_0 weights (gemm_quant_avx512.cpp),
// the Isa::Avx512 entries of their rows in the kernel table. Contract as
// GemmFn in weight_kernels.h (activations BlockQ8Act, ActFormat::Q8_32);
// each (row, token) result has the same bits whatever n_tokens, r0 and r1 are.
//
// Built for decode, where the weight is streamed once from DRAM: two 32-value
// blocks per 512-bit vpdpbusd, activations repacked once per call into the
// weight's lane order, the Q4_0 "- 8" and the Q8_0 unsigned shift folded
// into the vpdpbusd accumulator's start value, one float FMA per block pair.
// Needs AVX-512 F/BW/VL and VNNI (no VBMI: Cascade Lake runs it too).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weight_kernels.h"

namespace nexus {

NEXUS_GEMM_KERNEL(gemm_q8_0_avx512);
NEXUS_GEMM_KERNEL(gemm_q4_0_avx512);

}  // namespace nexus
