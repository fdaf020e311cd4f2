// AVX-512 VNNI kernels for Q8_0 / Q4_0 weights (gemm_quant_avx512.cpp), the
// quantized entries of gemm_kernels_avx512_vnni(). Signature and contract as
// GemmQ8Fn in gemm_kernels.h: rows [r0, r1) of W against n_tokens activation
// rows quantized to BlockQ8Act, y[t * ldy + r]; each (row, token) result has
// the same bits whatever n_tokens, r0 and r1 are.
//
// Built for decode, where the weight is streamed once from DRAM: two 32-value
// blocks per 512-bit vpdpbusd, activations repacked once per call into the
// weight's lane order, the Q4_0 "- 8" and the Q8_0 unsigned shift folded
// into the vpdpbusd accumulator's start value, one float FMA per block pair.
// Needs AVX-512 F/BW/VL and VNNI (no VBMI: Cascade Lake runs it too).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/act_quant.h"

namespace nexus {

void gemm_q8_0_avx512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks,
                      const BlockQ8Act* x, int64_t n_tokens, float* y, int64_t ldy);
void gemm_q4_0_avx512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks,
                      const BlockQ8Act* x, int64_t n_tokens, float* y, int64_t ldy);

}  // namespace nexus
