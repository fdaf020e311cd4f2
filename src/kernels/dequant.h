// Dequantization of stored rows to float32: the scalar reference of every
// weight type's layout (quant_blocks.h). The product kernels dequantize
// block by block with the same arithmetic (d * q in float32).
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace nexus {

// Writes n values of the row at `src` (stored as `type`) to dst[0..n), through
// the type's row of the kernel table (weight_kernels.h). n must be a multiple
// of the type's block size. Throws nexus::Error naming a type without kernels.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Per type (the DequantRowFn of weight_kernels.h); n a multiple of the block size.
void dequantize_row_f32(const void* src, float* dst, int64_t n);   // dequant.cpp
void dequantize_row_f16(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_1(const void* src, float* dst, int64_t n);  // dequant_legacy.cpp
void dequantize_row_q5_0(const void* src, float* dst, int64_t n);
void dequantize_row_q5_1(const void* src, float* dst, int64_t n);
void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n);
void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n);
void dequantize_row_q2_k(const void* src, float* dst, int64_t n);  // dequant_kquants.cpp
void dequantize_row_q3_k(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k(const void* src, float* dst, int64_t n);
void dequantize_row_q5_k(const void* src, float* dst, int64_t n);
void dequantize_row_q6_k(const void* src, float* dst, int64_t n);

}  // namespace nexus
