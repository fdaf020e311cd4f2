// Dequantization of one row of a weight to float32.
//
// Scalar reference for every supported type (F32, F16, BF16, Q8_0, Q4_0);
// the matrix kernels dequantize block by block with the same arithmetic.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace nexus {

// Writes n values of the row at `src` (stored as `type`) to dst[0..n).
// n must be a multiple of the type's block size. Throws nexus::Error for an
// unsupported type.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace nexus
