// Matrix products of a weight with float32 activations.
//
//   y[t, r] = sum_c W[r, c] * x[t, c]     for t < n_tokens, r < W.n_rows
//
// x: [n_tokens, W.n_cols] row-major float32; y: [n_tokens, W.n_rows].
// W may be F32, F16, BF16, Q8_0 or Q4_0. For Q8_0/Q4_0 the activations are
// quantized to 8 bits per block of 32 (act_quant.h) and each block's product
// is summed in int32, then scaled (as ggml does); float weights are widened to
// float32 in registers. Rows are split across the pool's threads; each weight
// row is read once for all n_tokens (so prefill is a matrix-matrix product,
// decode a matrix-vector one). The kernels are chosen once by CPUID
// (gemm_kernels.h). Accuracy: float32 accumulation, plus the 8-bit activation
// rounding for quantized weights (relative error ~1e-2 of sum |w x| at worst).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/tensor.h"

namespace nexus {

class ThreadPool;

// Throws nexus::Error for an unsupported weight type.
void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool);

// One product of matmul_shared_input: y = W x, y laid out as for matmul().
struct MatmulOut {
  const WeightView* w;
  float* y;
};
constexpr size_t kMaxSharedOutputs = 4;

// Several products of the same activations x (Q/K/V, gate/up): when all
// weights are Q8_0/Q4_0 with the same n_cols, x is quantized once (split
// across the threads) and all the weights' rows are split across the threads
// in one go; otherwise it is matmul() per product. Each y holds exactly what
// matmul(*w, x, y, n_tokens, pool) gives. At most kMaxSharedOutputs products
// (nexus::Error otherwise).
void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool);

// Dot product of one stored row (n values of `type`) with float32 x, through
// the same kernels as matmul with one token.
float dot_row(GgmlType type, const void* row, const float* x, int64_t n);

}  // namespace nexus
