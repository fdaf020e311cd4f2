// Portable reference product kernels, one per weight type: plain loops, one
// (row, token) at a time, the GemmFn contract of weight_kernels.h. What the
// SIMD kernels are tested against; every type has one.
//
// Quantized types sum each block's (or sub-block's) integer products exactly
// in int32 and scale them in float32, in the order of ggml's
// ggml_vec_dot_<type>_<vec_dot_type> reference loops (ggml-quants.c).
#pragma once

#include "kernels/weight_kernels.h"

namespace nexus {

// Float weights, activations ActFormat::F32 (gemm_ref.cpp).
NEXUS_GEMM_KERNEL(gemm_ref_f32);
NEXUS_GEMM_KERNEL(gemm_ref_f16);
NEXUS_GEMM_KERNEL(gemm_ref_bf16);
// Blocks of 32, activations ActFormat::Q8_32 (gemm_ref.cpp, gemm_ref_legacy.cpp).
NEXUS_GEMM_KERNEL(gemm_ref_q8_0);
NEXUS_GEMM_KERNEL(gemm_ref_q4_0);
NEXUS_GEMM_KERNEL(gemm_ref_q4_1);
NEXUS_GEMM_KERNEL(gemm_ref_q5_0);
NEXUS_GEMM_KERNEL(gemm_ref_q5_1);
NEXUS_GEMM_KERNEL(gemm_ref_iq4_nl);
// Super-blocks of 256, activations ActFormat::Q8_K (gemm_ref_kquants.cpp, gemm_ref_legacy.cpp for IQ4_XS).
NEXUS_GEMM_KERNEL(gemm_ref_q2_k);
NEXUS_GEMM_KERNEL(gemm_ref_q3_k);
NEXUS_GEMM_KERNEL(gemm_ref_q4_k);
NEXUS_GEMM_KERNEL(gemm_ref_q5_k);
NEXUS_GEMM_KERNEL(gemm_ref_q6_k);
NEXUS_GEMM_KERNEL(gemm_ref_iq4_xs);

}  // namespace nexus
