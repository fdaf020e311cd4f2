// Matrix-vector products (decode), dequantization (prefill GEMM input) and
// the embedding gather. See cuda_kernels.h for the contracts.
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/weight_units.cuh"

namespace nexus::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kTokenGroup = 8;  // tokens accumulated per pass over a row

// One warp per row; lane i takes units i, i + 32, ... of the row. x rows are
// read through the read-only cache: all rows of a block share them.
template <typename Unit>
__global__ void matvec_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                              const float* __restrict__ x, float* __restrict__ y, int32_t n_tokens) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= n_rows) return;  // whole warp leaves together: no shuffle below misses a lane
  const uint8_t* wr = w + row * row_bytes;
  const int64_t n_units = n_cols / Unit::kVals;
  for (int32_t t0 = 0; t0 < n_tokens; t0 += kTokenGroup) {
    const int nt = min(kTokenGroup, n_tokens - t0);
    float acc[kTokenGroup];
#pragma unroll
    for (int t = 0; t < kTokenGroup; ++t) acc[t] = 0.0f;
    for (int64_t u = lane; u < n_units; u += 32) {
      float wv[Unit::kVals];
      Unit::load(wr, u, wv);
      const int64_t c0 = u * Unit::kVals;
#pragma unroll
      for (int t = 0; t < kTokenGroup; ++t) {
        if (t < nt) {
          const float* xr = x + (t0 + t) * n_cols + c0;
          float s = 0.0f;
#pragma unroll
          for (int j = 0; j < Unit::kVals; ++j) s = fmaf(wv[j], __ldg(xr + j), s);
          acc[t] += s;
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kTokenGroup; ++t) {
      float s = acc[t];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0 && t < nt) y[(t0 + t) * n_rows + row] = s;
    }
  }
}

// One thread per unit of the selected rows; writes the values as fp16 or f32.
template <typename Unit, typename Out>
__global__ void dequant_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_cols, int64_t row0,
                               const int32_t* __restrict__ rows, int64_t n_rows, Out* __restrict__ out) {
  const int64_t units_per_row = n_cols / Unit::kVals;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_rows * units_per_row) return;
  const int64_t r = i / units_per_row, u = i % units_per_row;
  const int64_t src_row = rows ? static_cast<int64_t>(rows[r]) : row0 + r;
  float wv[Unit::kVals];
  Unit::load(w + src_row * row_bytes, u, wv);
  Out* o = out + r * n_cols + u * Unit::kVals;
#pragma unroll
  for (int j = 0; j < Unit::kVals; ++j) {
    if constexpr (sizeof(Out) == 2) reinterpret_cast<__half*>(o)[j] = __float2half_rn(wv[j]);
    else o[j] = wv[j];
  }
}

bool vector_ok(const DeviceWeight& w) {
  return w.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

bool is_kquant(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K; }

void check_weight(const DeviceWeight& w, const char* what) {
  if (!supported_weight_type(w.type))
    throw Error(std::string(what) + ": unsupported weight type " + std::string(ggml_type_name(w.type)));
  if ((w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_0) && w.n_cols % 32 != 0)
    throw Error(std::string(what) + ": quantized row of " + std::to_string(w.n_cols) + " values is not whole blocks");
  if (is_kquant(w.type)) {
    if (w.n_cols % kQK_K != 0)
      throw Error(std::string(what) + ": " + std::string(ggml_type_name(w.type)) + " row of " +
                  std::to_string(w.n_cols) + " values is not whole super-blocks of 256");
    // The unit readers' wide loads (weight_units.cuh) need these.
    if (w.row_bytes != ggml_row_size(w.type, static_cast<uint64_t>(w.n_cols)))
      throw Error(std::string(what) + ": padded " + std::string(ggml_type_name(w.type)) + " rows");
    if (reinterpret_cast<uintptr_t>(w.data) % 16 != 0)
      throw Error(std::string(what) + ": " + std::string(ggml_type_name(w.type)) + " data not 16-byte aligned");
  }
  if (!w.data && w.n_rows > 0) throw Error(std::string(what) + ": null weight");
}

// Calls f(Unit{}) with the unit reader for w's type and alignment.
template <typename F>
void with_unit(const DeviceWeight& w, F&& f) {
  const bool vec = vector_ok(w);
  switch (w.type) {
    case GgmlType::Q8_0: f(UnitQ8_0{}); break;
    case GgmlType::Q4_0: f(UnitQ4_0{}); break;
    case GgmlType::Q4_K: f(UnitQ4K{}); break;
    case GgmlType::Q5_K: f(UnitQ5K{}); break;
    case GgmlType::Q6_K: f(UnitQ6K{}); break;
    case GgmlType::F16: vec ? f(UnitF16x8{}) : f(UnitF16{}); break;
    case GgmlType::BF16: vec ? f(UnitBF16x8{}) : f(UnitBF16{}); break;
    case GgmlType::F32: vec ? f(UnitF32x4{}) : f(UnitF32{}); break;
    default: throw Error("CUDA kernels: unsupported weight type");
  }
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t g = (n + threads - 1) / threads;
  if (g > 0x7fffffff) throw Error("CUDA kernels: grid too large");
  return static_cast<unsigned>(g);
}

}  // namespace

bool supported_weight_type(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || quantized_weight_type(t);
}

bool quantized_weight_type(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || is_kquant(t);
}

void matvec(const DeviceWeight& w, const float* x, float* y, int32_t n_tokens, cudaStream_t stream) {
  check_weight(w, "matvec");
  if (n_tokens <= 0 || w.n_rows == 0) return;
  const unsigned grid = grid_for(w.n_rows, kWarpsPerBlock);
  with_unit(w, [&](auto unit) {
    using Unit = decltype(unit);
    matvec_kernel<Unit><<<grid, kWarpsPerBlock * 32, 0, stream>>>(static_cast<const uint8_t*>(w.data), w.row_bytes,
                                                                  w.n_rows, w.n_cols, x, y, n_tokens);
  });
  NEXUS_CUDA_CHECK_LAUNCH();
}

void dequantize_f16(const DeviceWeight& w, int64_t row0, int64_t n_rows, uint16_t* out, cudaStream_t stream) {
  check_weight(w, "dequantize_f16");
  if (row0 < 0 || n_rows < 0 || row0 + n_rows > w.n_rows) throw Error("dequantize_f16: rows out of range");
  if (n_rows == 0) return;
  with_unit(w, [&](auto unit) {
    using Unit = decltype(unit);
    const int64_t n = n_rows * (w.n_cols / Unit::kVals);
    dequant_kernel<Unit, uint16_t><<<grid_for(n, 256), 256, 0, stream>>>(
        static_cast<const uint8_t*>(w.data), w.row_bytes, w.n_cols, row0, nullptr, n_rows, out);
  });
  NEXUS_CUDA_CHECK_LAUNCH();
}

void gather_rows_f32(const DeviceWeight& w, const int32_t* rows, int32_t n, float* out, cudaStream_t stream) {
  check_weight(w, "gather_rows_f32");
  if (n <= 0) return;
  with_unit(w, [&](auto unit) {
    using Unit = decltype(unit);
    const int64_t total = static_cast<int64_t>(n) * (w.n_cols / Unit::kVals);
    dequant_kernel<Unit, float><<<grid_for(total, 256), 256, 0, stream>>>(
        static_cast<const uint8_t*>(w.data), w.row_bytes, w.n_cols, 0, rows, n, out);
  });
  NEXUS_CUDA_CHECK_LAUNCH();
}

namespace {
__global__ void f32_to_f16_kernel(const float* __restrict__ x, __half* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(x[i]);
}
__global__ void f32_to_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}
}  // namespace

void convert_f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  f32_to_f16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, reinterpret_cast<__half*>(y), n);
  NEXUS_CUDA_CHECK_LAUNCH();
}

void convert_f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  f32_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, reinterpret_cast<__nv_bfloat16*>(y), n);
  NEXUS_CUDA_CHECK_LAUNCH();
}

}  // namespace nexus::cuda
