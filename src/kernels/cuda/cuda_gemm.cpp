#include "kernels/cuda/cuda_gemm.h"

#include "kernels/cuda/cublas_api.h"

#include <algorithm>
#include <string>

namespace nexus::cuda {
namespace {
// cuBLAS needs a user workspace to run inside stream capture without
// allocating; 32 MiB covers Hopper's recommendation (cuBLAS docs, "cublasSetWorkspace").
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
}  // namespace

CudaMatmul::CudaMatmul(cudaStream_t stream, int32_t max_tokens, int64_t max_cols, int64_t max_weight_elems)
    : stream_(stream), max_tokens_(max_tokens), max_cols_(max_cols) {
  if (max_tokens < 1 || max_cols < 1) throw Error("CudaMatmul: max_tokens and max_cols must be positive");
  CUBLAS_CHECK(cublas().create(&handle_));
  try {
    CUBLAS_CHECK(cublas().set_stream(handle_, stream_));
    workspace_.resize(kWorkspaceBytes);
    CUBLAS_CHECK(cublas().set_workspace(handle_, workspace_.get(), workspace_.bytes()));
    if (max_tokens > kMatvecMaxTokens) {
      x16_.resize(static_cast<size_t>(max_tokens) * static_cast<size_t>(max_cols));
      const int64_t chunk = std::min<int64_t>(max_weight_elems, kDequantChunkElems);
      // At least one row per chunk, whatever the caps say.
      w16_.resize(static_cast<size_t>(std::max<int64_t>(chunk, max_cols)));
    }
  } catch (...) {
    cublas().destroy(handle_);
    throw;
  }
}

CudaMatmul::~CudaMatmul() {
  if (handle_) (void)cublas().destroy(handle_);
}

// Row-major y[t, r] = sum_c W[r, c] x[t, c] is, in cuBLAS's column-major
// terms, C (n_rows x n_tokens, ld = ldy) = op(A) B with A = W viewed as
// [n_cols x n_rows] (ld n_cols), op = transpose, B = x as [n_cols x n_tokens].
void CudaMatmul::gemm_f16(const uint16_t* w, int64_t n_rows, int64_t n_cols, bool bf16, const uint16_t* x, float* y,
                          int32_t n_tokens, int64_t ldy) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  CUBLAS_CHECK(cublas().gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_rows), n_tokens,
                            static_cast<int>(n_cols), &alpha, w, t, static_cast<int>(n_cols), x, t,
                            static_cast<int>(n_cols), &beta, y, CUDA_R_32F, static_cast<int>(ldy),
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaMatmul::run(const DeviceWeight& w, const float* x, float* y, int32_t n_tokens) {
  if (n_tokens <= 0) return;
  if (n_tokens > max_tokens_ || w.n_cols > max_cols_)
    throw Error("CudaMatmul: " + std::to_string(n_tokens) + " x " + std::to_string(w.n_cols) +
                " exceeds the buffers made for " + std::to_string(max_tokens_) + " x " + std::to_string(max_cols_));
  if (use_matvec(n_tokens)) {
    matvec(w, x, y, n_tokens, stream_);
    return;
  }
  if (w.n_rows > INT32_MAX || w.n_cols > INT32_MAX) throw Error("CudaMatmul: matrix too large for cuBLAS");
  const int64_t xn = static_cast<int64_t>(n_tokens) * w.n_cols;
  switch (w.type) {
    case GgmlType::F32: {
      const float alpha = 1.0f, beta = 0.0f;
      CUBLAS_CHECK(cublas().sgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.n_rows), n_tokens,
                               static_cast<int>(w.n_cols), &alpha, static_cast<const float*>(w.data),
                               static_cast<int>(w.row_bytes / 4), x, static_cast<int>(w.n_cols), &beta, y,
                               static_cast<int>(w.n_rows)));
      return;
    }
    case GgmlType::F16:
    case GgmlType::BF16: {
      const bool bf16 = w.type == GgmlType::BF16;
      if (w.row_bytes != static_cast<size_t>(w.n_cols) * 2) throw Error("CudaMatmul: padded F16/BF16 rows");
      if (bf16) convert_f32_to_bf16(x, x16_.get(), xn, stream_);
      else convert_f32_to_f16(x, x16_.get(), xn, stream_);
      gemm_f16(static_cast<const uint16_t*>(w.data), w.n_rows, w.n_cols, bf16, x16_.get(), y, n_tokens, w.n_rows);
      return;
    }
    default: {  // quantized: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K
      if (!quantized_weight_type(w.type))
        throw Error("CudaMatmul: unsupported weight type " + std::string(ggml_type_name(w.type)));
      convert_f32_to_f16(x, x16_.get(), xn, stream_);
      const int64_t chunk_rows = std::max<int64_t>(1, static_cast<int64_t>(w16_.size()) / w.n_cols);
      for (int64_t r0 = 0; r0 < w.n_rows; r0 += chunk_rows) {
        const int64_t nr = std::min(chunk_rows, w.n_rows - r0);
        dequantize_f16(w, r0, nr, w16_.get(), stream_);
        // Rows r0.. of every token: column block r0 of y (ld = n_rows).
        gemm_f16(w16_.get(), nr, w.n_cols, false, x16_.get(), y + r0, n_tokens, w.n_rows);
      }
      return;
    }
  }
}

}  // namespace nexus::cuda
