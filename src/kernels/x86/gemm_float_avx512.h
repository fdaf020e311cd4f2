// Float-weight (F32, F16, BF16) kernels of the AVX-512 table, with the
// GemmFFn contract of kernels/gemm_kernels.h: rows [r0, r1) of the weight
// against float32 activations [n_tokens, n_cols], into y[t * ldy + r].
// Internal to kernels/x86 (gemm_avx512.cpp puts them in its table).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nexus {

void gemm_f32_avx512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
                     int64_t n_tokens, float* y, int64_t ldy);
void gemm_f16_avx512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
                     int64_t n_tokens, float* y, int64_t ldy);
void gemm_bf16_avx512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
                      int64_t n_tokens, float* y, int64_t ldy);

}  // namespace nexus
