// K-quant (Q2_K .. Q6_K) product kernels for x86: weight rows against Q8_K
// activations, the GemmFn contract of weight_kernels.h (rows [r0, r1) x
// tokens [0, n_tokens), y[t * ldy + r]; x: BlockQ8K [n_tokens, n_cols / 256];
// n_cols a multiple of 256). Built for decode (1-8 tokens, each weight row
// read once from DRAM).
//
// Same bits as gemm_ref_q*_k (gemm_ref_kquants.cpp) for every (row, token),
// whatever n_tokens, r0 and r1: per super-block they form the same exact
// int32 sums (scales times q . x_q; mins, and Q3_K's / Q6_K's offsets of 4 /
// 32, through BlockQ8K::bsums) and apply the same two float32 fused
// multiply-adds in the same order.
//
// Source: ggml's ggml-cpu/arch/x86/quants.c (ggml_vec_dot_q*_K_q8_K, AVX2)
// for the approach (bytes, maddubs / madd, bsums), ggml-quants.c for the
// layouts.
#pragma once

#include "kernels/weight_kernels.h"

namespace nexus {

// AVX2 + FMA + F16C (gemm_kquants_avx2.cpp): call only when cpu_features().avx2.
NEXUS_GEMM_KERNEL(gemm_q2_k_avx2);
NEXUS_GEMM_KERNEL(gemm_q3_k_avx2);
NEXUS_GEMM_KERNEL(gemm_q4_k_avx2);
NEXUS_GEMM_KERNEL(gemm_q5_k_avx2);
NEXUS_GEMM_KERNEL(gemm_q6_k_avx2);

}  // namespace nexus
