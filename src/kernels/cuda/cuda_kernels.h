// CUDA kernels of the llama forward pass, as host-callable launchers.
//
// Every launcher enqueues work on `stream` and returns without waiting; it
// throws nexus::Error (CUDA_CHECK) when the launch itself fails. All pointers
// are device pointers unless said otherwise; activations are row-major
// float32, one row per batch token. None of them allocates, so they can be
// recorded in a CUDA graph. Each mirrors a CPU function (named below) and the
// tests (tests/test_cuda_kernels.cpp) compare the two on random inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"

namespace nexus::cuda {

// A weight matrix in device memory, in its GGUF storage layout (tensor.h):
// n_rows rows of n_cols values, row r at data + r * row_bytes, each row
// F32, F16, BF16, or blocks of Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K
// (quant_blocks.h). Q8_0 / Q4_0 need n_cols % 32 == 0, the K-quants
// n_cols % 256 == 0 (whole super-blocks; the loader guarantees both), unpadded
// rows (row_bytes = ggml_row_size) and 16-byte aligned data (cudaMalloc's
// buffers are 256-byte aligned). The kernels throw nexus::Error otherwise.
struct DeviceWeight {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t row_bytes = 0;
};

// True for the types these kernels read (F32, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K); every other type is refused by name.
bool supported_weight_type(GgmlType t);
// The quantized ones among them (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K): the cuBLAS
// path (cuda_gemm.h) dequantizes these to fp16 in row chunks first.
bool quantized_weight_type(GgmlType t);

// Matrix-vector products for small batches (decode), matmul.h semantics:
//   y[t, r] = sum_c W[r, c] * x[t, c],  t < n_tokens, r < W.n_rows
// x: [n_tokens, n_cols], y: [n_tokens, n_rows]. One warp per weight row reads
// the row once for up to 8 tokens (larger n_tokens loop over groups of 8,
// re-reading the row from cache). Weights are widened to float32 and summed
// in float32 (no activation quantization, unlike the CPU kernels).
void matvec(const DeviceWeight& w, const float* x, float* y, int32_t n_tokens, cudaStream_t stream);

// Dequantizes rows [row0, row0 + n_rows) of w into out ([n_rows, n_cols]
// IEEE fp16, as uint16_t) -- the input of the cuBLAS GEMM for prefill.
void dequantize_f16(const DeviceWeight& w, int64_t row0, int64_t n_rows, uint16_t* out, cudaStream_t stream);

// out[i] = float32 of row rows[i] of w, i < n (the token embedding lookup;
// dequantize_row on the CPU). rows: device array of n ids in [0, n_rows).
void gather_rows_f32(const DeviceWeight& w, const int32_t* rows, int32_t n, float* out, cudaStream_t stream);

// y[i] = fp16(x[i]) or bf16(x[i]), round to nearest even, i < n.
void convert_f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
void convert_f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);

// RMSNorm (ops.h rmsnorm) of n_rows rows of width n: out row i = RMSNorm of
// x row (rows ? rows[i] : i) times weight. Sum of squares in float64 as on
// the CPU. out must not alias x unless rows is null.
void rmsnorm(float* out, const float* x, const int32_t* rows, const float* weight, int32_t n_rows, int32_t n,
             float eps, cudaStream_t stream);

// RoPE (ops.h rope), in place, for n_tokens rows of [n_head, head_dim];
// token t rotates by position pos[t] (device array). Angles in float64.
void rope(float* x, const int32_t* pos, int32_t n_tokens, int32_t n_head, int32_t head_dim, int32_t n_rot,
          float freq_base, cudaStream_t stream);

// SwiGLU (ops.h swiglu): gate[i] = silu(gate[i]) * up[i], i < n.
void swiglu(float* gate, const float* up, int64_t n, cudaStream_t stream);

// x[i] += y[i], i < n (the residual adds).
void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream);

// The paged KV cache of the GPU layers (model/kv_cache.h layout, F16):
//   [n_blocks][n_layer][2 (K, V)][block_size][n_embd_kv]
// Positions of a sequence live in the blocks of its block table: position p
// is row p % block_size of block block_tables[seq * bt_stride + p / block_size].
struct PagedCache {
  uint16_t* data = nullptr;   // fp16 elements
  int32_t block_size = 0;
  int32_t n_embd_kv = 0;
  int64_t block_elems = 0;    // n_layer * 2 * block_size * n_embd_kv
  int64_t layer_elems = 0;    // 2 * block_size * n_embd_kv
};

// Per-token bookkeeping of a batch, device arrays of n_tokens entries:
// position, and the sequence (row of block_tables) the token belongs to.
struct BatchMeta {
  const int32_t* pos = nullptr;
  const int32_t* seq = nullptr;
  const int32_t* block_tables = nullptr;  // [n_seq][bt_stride]
  int32_t bt_stride = 0;
};

// Stores every token's K and V rows ([n_tokens, n_embd_kv] float32) of
// `layer` into the cache, rounded to fp16 (KvCache::write).
void kv_write(const PagedCache& cache, const BatchMeta& meta, int32_t layer, const float* k, const float* v,
              int32_t n_tokens, cudaStream_t stream);

// Causal attention over the paged cache (attention.h semantics): token t,
// query head h attends to positions [0, pos[t]] of its sequence, KV head
// h / (n_head / n_head_kv), scale 1/sqrt(head_dim), online softmax.
// q, out: [n_tokens, n_head * head_dim]. head_dim <= 256. One thread block of
// 8 warps per (token, head); the warps split the keys and merge their partial
// softmax states at the end. Used for decode and prefill alike (K/V of every
// token of the step must have been written first).
void paged_attention(const PagedCache& cache, const BatchMeta& meta, int32_t layer, const float* q, float* out,
                     int32_t n_tokens, int32_t n_head, int32_t n_head_kv, int32_t head_dim, cudaStream_t stream);

// Greedy sampling: out[i] = argmax of logits row i ([n_rows, n_vocab]); ties
// go to the lowest id and NaN never wins (Sampler's greedy rule).
void argmax_rows(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, cudaStream_t stream);

}  // namespace nexus::cuda
