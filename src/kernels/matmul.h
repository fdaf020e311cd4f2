// Matrix products of a weight with float32 activations.
//
//   y[t, r] = sum_c W[r, c] * x[t, c]     for t < n_tokens, r < W.n_rows
//
// x: [n_tokens, W.n_cols] row-major float32; y: [n_tokens, W.n_rows].
// W may be F32, F16, BF16, Q8_0 or Q4_0; quantized rows are dequantized block
// by block inside the kernel (never materialised). Rows are split across the
// pool's threads; each weight row is read once for all n_tokens (so prefill is
// a matrix-matrix product, decode a matrix-vector one).
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

namespace nexus {

class ThreadPool;

// Throws nexus::Error for an unsupported weight type.
void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool);

// Dot product of one stored row (n values of `type`) with float32 x; the
// scalar reference the kernels are checked against.
float dot_row(GgmlType type, const void* row, const float* x, int64_t n);

}  // namespace nexus
