// Matrix products of a weight with float32 activations.
//
//   y[t, r] = sum_c W[r, c] * x[t, c]     for t < n_tokens, r < W.n_rows
//
// x: [n_tokens, W.n_cols] row-major float32; y: [n_tokens, W.n_rows].
// W may be any type of the kernel table (weight_kernels.h). For quantized
// types the activations are quantized to 8 bits in the format the type's dot
// product takes (act_quant.h: blocks of 32, or super-blocks of 256 for the
// K-quants) and each block's product is summed in int32, then scaled (as
// ggml does); float weights are widened to float32 in registers. Rows are
// split across the pool's threads; each weight row is read once for all
// n_tokens (so prefill is a matrix-matrix product, decode a matrix-vector
// one). The instruction set is chosen once by CPUID: the decode one below
// 8 tokens, the AVX-512 prefill kernels (register-blocked) from 8, and on
// AMX CPUs the AMX kernels from 128 tokens (Q8_0, Q4_0); without AVX-512 the
// decode one throughout. NEXUS_KERNELS=ref|avx2|avx512_vnni forces one for
// every size, NEXUS_KERNELS=avx512_prefill the AVX-512 prefill kernels from
// 8 tokens (no AMX), NEXUS_KERNELS=amx the AMX kernels from 16.
// Accuracy: float32 accumulation, plus the 8-bit activation rounding for
// quantized weights (relative error ~1e-2 of sum |w x| at worst).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/tensor.h"
#include "kernels/weight_kernels.h"

namespace nexus {

class ThreadPool;

// Throws nexus::Error naming a weight type the kernel table lacks.
void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool);

// One product of matmul_shared_input: y = W x, y laid out as for matmul().
struct MatmulOut {
  const WeightView* w;
  float* y;
};
constexpr size_t kMaxSharedOutputs = 4;

// Several products of the same activations x (Q/K/V, gate/up): when all
// weights take the same quantized activation format with the same n_cols
// (Q4_K and Q6_K of a Q4_K_M file, say), x is quantized once (split
// across the threads) and all the weights' rows are split across the threads
// in one go; otherwise it is matmul() per product. Each y holds exactly what
// matmul(*w, x, y, n_tokens, pool) gives. At most kMaxSharedOutputs products
// (nexus::Error otherwise).
void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool);

// Dot product of one stored row (n values of `type`) with float32 x, through
// the same kernels as matmul with one token.
float dot_row(GgmlType type, const void* row, const float* x, int64_t n);

// The instruction set whose kernel matmul() runs for this type and batch
// size (Ref for a type without kernels).
Isa matmul_isa(GgmlType type, int64_t n_tokens);

}  // namespace nexus
