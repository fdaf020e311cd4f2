// AVX-512 VNNI decode kernels for the K-quants Q2_K .. Q6_K
// (gemm_kquants_avx512.cpp), the Isa::Avx512 entries of their rows in the
// kernel table. Contract as GemmFn in weight_kernels.h: activations BlockQ8K
// [n_tokens, n_cols / 256] (ActFormat::Q8_K), y[t * ldy + r] for rows
// [r0, r1) and tokens [0, n_tokens); each (row, token) result has the same
// bits whatever n_tokens, r0 and r1 are.
//
// Built for decode (1-8 tokens), where each weight row is streamed once from
// DRAM: per super-block, vpdpbusd of the unsigned weight levels against the
// signed Q8_K bytes, the integer sub-block scales applied to those int32 sums
// by vpdpwssd, mins (Q2_K, Q4_K, Q5_K) and level offsets (Q3_K's 4, Q6_K's
// 32) through the activations' bsums, then one float FMA per super-block
// with d * x.d. Tiles of up to 4 tokens per weight row, software prefetch.
// Needs AVX-512 F/BW/VL/DQ and VNNI (no VBMI).
//
// Source: ggml's block layouts (ggml-common.h) and ggml_vec_dot_q*_K_q8_K
// (ggml-cpu/quants.c), whose integer sums these reproduce exactly; results
// differ from gemm_ref_q*_k (gemm_ref_kquants.cpp) only by float32 rounding
// (tests/test_quant_kquants_avx512.cpp states the bound).
#pragma once

#include "kernels/weight_kernels.h"

namespace nexus {

NEXUS_GEMM_KERNEL(gemm_q2_k_avx512);
NEXUS_GEMM_KERNEL(gemm_q3_k_avx512);
NEXUS_GEMM_KERNEL(gemm_q4_k_avx512);
NEXUS_GEMM_KERNEL(gemm_q5_k_avx512);
NEXUS_GEMM_KERNEL(gemm_q6_k_avx512);

}  // namespace nexus
