// AVX-512 VNNI register-blocked prefill kernels for Q4_K / Q5_K / Q6_K
// (16 weight rows x 8 tokens per tile; gemm_kquants_prefill_avx512.cpp), the
// Isa::Avx512Prefill entries of their rows in the kernel table. Contract as
// GemmFn in weight_kernels.h: activations BlockQ8K [n_tokens, n_cols / 256]
// (ActFormat::Q8_K), y[t * ldy + r] for rows [r0, r1) and tokens
// [0, n_tokens); each (row, token) result has the same bits whatever
// n_tokens, r0 and r1 are. For many tokens (prefill); below ~8 tokens the
// decode kernels (gemm_kquants_avx512.h) cost less, as they repack no weights.
//
// Source: ggml's block layouts and ggml_vec_dot_q*_K_q8_K, whose integer
// sums these reproduce exactly; results differ from gemm_ref_q*_k only by
// float32 rounding (tests/test_quant_kquants_avx512.cpp states the bound).
#pragma once

#include "kernels/weight_kernels.h"

namespace nexus {

NEXUS_GEMM_KERNEL(gemm_q4_k_prefill_avx512);
NEXUS_GEMM_KERNEL(gemm_q5_k_prefill_avx512);
NEXUS_GEMM_KERNEL(gemm_q6_k_prefill_avx512);

}  // namespace nexus
