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

#define NEXUS_GEMM_REF(name)                                                                                 \
  void gemm_ref_##name(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x, \
                       int64_t n_tokens, float* y, int64_t ldy)
// Float weights, activations ActFormat::F32 (gemm_ref.cpp).
NEXUS_GEMM_REF(f32);
NEXUS_GEMM_REF(f16);
NEXUS_GEMM_REF(bf16);
// Blocks of 32, activations ActFormat::Q8_32 (gemm_ref.cpp, gemm_ref_legacy.cpp).
NEXUS_GEMM_REF(q8_0);
NEXUS_GEMM_REF(q4_0);
NEXUS_GEMM_REF(q4_1);
NEXUS_GEMM_REF(q5_0);
NEXUS_GEMM_REF(q5_1);
NEXUS_GEMM_REF(iq4_nl);
// Super-blocks of 256, activations ActFormat::Q8_K (gemm_ref_kquants.cpp, gemm_ref_legacy.cpp for IQ4_XS).
NEXUS_GEMM_REF(q2_k);
NEXUS_GEMM_REF(q3_k);
NEXUS_GEMM_REF(q4_k);
NEXUS_GEMM_REF(q5_k);
NEXUS_GEMM_REF(q6_k);
NEXUS_GEMM_REF(iq4_xs);
#undef NEXUS_GEMM_REF

}  // namespace nexus
