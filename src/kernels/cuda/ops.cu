// Row and element-wise kernels: RMSNorm, RoPE, SwiGLU, residual add, and the
// greedy argmax. See cuda_kernels.h for the contracts.
#include <cfloat>
#include <climits>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace nexus::cuda {
namespace {

constexpr int kRowThreads = 256;

unsigned grid_for(int64_t n, int threads) {
  const int64_t g = (n + threads - 1) / threads;
  if (g > 0x7fffffff) throw Error("CUDA kernels: grid too large");
  return static_cast<unsigned>(g);
}

// Block-wide sum of a double over kRowThreads threads; every thread gets it.
__device__ double block_sum(double v) {
  __shared__ double partial[kRowThreads / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int i = 0; i < kRowThreads / 32; ++i) total += partial[i];
  return total;
}

__global__ void rmsnorm_kernel(float* __restrict__ out, const float* __restrict__ x, const int32_t* __restrict__ rows,
                               const float* __restrict__ weight, int32_t n, float eps) {
  const int64_t i = blockIdx.x;
  const float* xr = x + static_cast<int64_t>(rows ? rows[i] : i) * n;
  double ss = 0.0;
  for (int32_t c = threadIdx.x; c < n; c += kRowThreads) ss += static_cast<double>(xr[c]) * xr[c];
  ss = block_sum(ss);
  const float scale = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(n) + eps));
  float* o = out + i * n;
  for (int32_t c = threadIdx.x; c < n; c += kRowThreads) o[c] = xr[c] * scale * weight[c];
}

// One block per token; thread j handles rotation pair j of every head.
__global__ void rope_kernel(float* __restrict__ x, const int32_t* __restrict__ pos, int32_t n_head, int32_t head_dim,
                            int32_t n_rot, float freq_base) {
  const int64_t t = blockIdx.x;
  float* xt = x + t * static_cast<int64_t>(n_head) * head_dim;
  const double p = static_cast<double>(pos[t]);
  for (int32_t pair = threadIdx.x; pair < n_rot / 2; pair += blockDim.x) {
    const int32_t i = 2 * pair;
    const double theta = p * pow(static_cast<double>(freq_base), -static_cast<double>(i) / n_rot);
    const float c = static_cast<float>(cos(theta));
    const float s = static_cast<float>(sin(theta));
    for (int32_t h = 0; h < n_head; ++h) {
      float* v = xt + static_cast<int64_t>(h) * head_dim + i;
      const float v0 = v[0], v1 = v[1];
      v[0] = v0 * c - v1 * s;
      v[1] = v0 * s + v1 * c;
    }
  }
}

__global__ void swiglu_kernel(float* __restrict__ gate, const float* __restrict__ up, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

// Better candidate: larger value, or equal value and lower id. NaN is never
// stored (the scan skips it), so comparisons see numbers and -inf only.
__device__ __forceinline__ bool better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

__global__ void argmax_kernel(const float* __restrict__ logits, int32_t n_vocab, int32_t* __restrict__ out) {
  constexpr int kThreads = 1024;
  __shared__ float sv[kThreads / 32];
  __shared__ int32_t si[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  float bv = -INFINITY;
  int32_t bi = INT_MAX;
  for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
    const float v = row[i];
    if (!isnan(v) && better(v, i, bv, bi)) {
      bv = v;
      bi = i;
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (better(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float v = sv[0];
    int32_t id = si[0];
    for (int w = 1; w < kThreads / 32; ++w)
      if (better(sv[w], si[w], v, id)) {
        v = sv[w];
        id = si[w];
      }
    out[blockIdx.x] = id == INT_MAX ? 0 : id;  // every logit NaN: 0, as on the CPU
  }
}

}  // namespace

void rmsnorm(float* out, const float* x, const int32_t* rows, const float* weight, int32_t n_rows, int32_t n,
             float eps, cudaStream_t stream) {
  if (n_rows <= 0 || n <= 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(n_rows), kRowThreads, 0, stream>>>(out, x, rows, weight, n, eps);
  NEXUS_CUDA_CHECK_LAUNCH();
}

void rope(float* x, const int32_t* pos, int32_t n_tokens, int32_t n_head, int32_t head_dim, int32_t n_rot,
          float freq_base, cudaStream_t stream) {
  if (n_tokens <= 0 || n_rot < 2) return;
  if (n_rot > head_dim || n_rot % 2 != 0) throw Error("rope: n_rot must be even and <= head_dim");
  const int threads = n_rot / 2 < 128 ? ((n_rot / 2 + 31) / 32) * 32 : 128;
  rope_kernel<<<static_cast<unsigned>(n_tokens), threads, 0, stream>>>(x, pos, n_head, head_dim, n_rot, freq_base);
  NEXUS_CUDA_CHECK_LAUNCH();
}

void swiglu(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  swiglu_kernel<<<grid_for(n, 256), 256, 0, stream>>>(gate, up, n);
  NEXUS_CUDA_CHECK_LAUNCH();
}

void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, y, n);
  NEXUS_CUDA_CHECK_LAUNCH();
}

void argmax_rows(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, cudaStream_t stream) {
  if (n_rows <= 0) return;
  if (n_vocab <= 0) throw Error("argmax_rows: n_vocab must be positive");
  argmax_kernel<<<static_cast<unsigned>(n_rows), 1024, 0, stream>>>(logits, n_vocab, out);
  NEXUS_CUDA_CHECK_LAUNCH();
}

}  // namespace nexus::cuda
