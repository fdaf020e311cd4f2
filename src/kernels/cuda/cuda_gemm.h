// CudaMatmul: y = x W^T on the GPU for any batch size (matmul.h semantics),
// choosing per call between
//   - the matvec kernel (n_tokens <= kMatvecMaxTokens: decode; the weight is
//     read once, memory-bound), and
//   - cuBLAS GEMM (prefill and large decode batches): F32 weights through
//     SGEMM; F16 / BF16 weights used in place with the activations converted
//     to the same type (cublasGemmEx, float32 accumulation and output);
//     quantized weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K: quantized_weight_type)
//     dequantized to fp16 in row chunks of a scratch buffer, then the same
//     fp16 GEMM.
// It owns the cuBLAS handle, its workspace and the scratch buffers, all
// allocated up front (constructor), so calls can be captured in a CUDA graph.
// Not thread-safe; one per stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_buffer.h"

namespace nexus::cuda {

constexpr int32_t kMatvecMaxTokens = 8;

// Whether a product of n_tokens rows goes to the matvec kernel (true) or to
// cuBLAS (false). Pure function, shared with the tests.
inline bool use_matvec(int32_t n_tokens) { return n_tokens <= kMatvecMaxTokens; }

class CudaMatmul {
 public:
  // max_tokens: largest n_tokens of any call; max_cols: largest n_cols;
  // max_weight_elems: largest n_rows * n_cols of a quantized weight (the
  // dequantization scratch is min(this, kDequantChunkElems) fp16 values).
  CudaMatmul(cudaStream_t stream, int32_t max_tokens, int64_t max_cols, int64_t max_weight_elems);
  ~CudaMatmul();
  CudaMatmul(const CudaMatmul&) = delete;
  CudaMatmul& operator=(const CudaMatmul&) = delete;

  // y[t, r] = sum_c W[r, c] x[t, c]; x: [n_tokens, n_cols], y: [n_tokens, n_rows].
  // Throws nexus::Error when n_tokens or n_cols exceed what the constructor was given.
  void run(const DeviceWeight& w, const float* x, float* y, int32_t n_tokens);

  static constexpr int64_t kDequantChunkElems = int64_t{64} << 20;  // 128 MiB of fp16

 private:
  void gemm_f16(const uint16_t* w, int64_t n_rows, int64_t n_cols, bool bf16, const uint16_t* x, float* y,
                int32_t n_tokens, int64_t ldy);

  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
  int32_t max_tokens_;
  int64_t max_cols_;
  DeviceBuffer<uint8_t> workspace_;
  DeviceBuffer<uint16_t> x16_;   // activations as fp16 / bf16  [max_tokens, max_cols]
  DeviceBuffer<uint16_t> w16_;   // dequantized weight rows      [chunk]
};

}  // namespace nexus::cuda
