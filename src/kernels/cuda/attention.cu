// K/V cache writes and causal attention over the paged fp16 cache
// (cuda_kernels.h). Online softmax as in attention.h (Milakov & Gimelshein
// 2018), split over the warps of a block and merged at the end, in the manner
// of FlashAttention's split-KV decode (Dao et al. 2023, "Flash-Decoding").
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"

namespace nexus::cuda {
namespace {

constexpr int kAttnWarps = 8;
constexpr int kMaxHeadDim = 256;

// Start of the K row of `p` for token t's sequence in `layer` (V: + layer_elems / 2).
__device__ __forceinline__ int64_t k_row_offset(const PagedCache& c, const BatchMeta& m, int32_t t, int32_t layer,
                                                int32_t p) {
  const int32_t block = m.block_tables[static_cast<int64_t>(m.seq[t]) * m.bt_stride + p / c.block_size];
  return block * c.block_elems + layer * c.layer_elems + static_cast<int64_t>(p % c.block_size) * c.n_embd_kv;
}

// One block per token, threads over the row.
__global__ void kv_write_kernel(PagedCache c, BatchMeta m, int32_t layer, const float* __restrict__ k,
                                const float* __restrict__ v) {
  const int32_t t = blockIdx.x;
  const int64_t off = k_row_offset(c, m, t, layer, m.pos[t]);
  __half* base = reinterpret_cast<__half*>(c.data);
  const float* kr = k + static_cast<int64_t>(t) * c.n_embd_kv;
  const float* vr = v + static_cast<int64_t>(t) * c.n_embd_kv;
  for (int32_t i = threadIdx.x; i < c.n_embd_kv; i += blockDim.x) {
    base[off + i] = __float2half_rn(kr[i]);
    base[off + c.layer_elems / 2 + i] = __float2half_rn(vr[i]);
  }
}

// DPL: head dimensions per lane (head_dim <= 32 * DPL); lane l holds
// dimensions l, l + 32, ... of q and of its output accumulator.
template <int DPL>
__global__ void __launch_bounds__(kAttnWarps * 32)
    paged_attention_kernel(PagedCache c, BatchMeta m, int32_t layer, const float* __restrict__ q,
                           float* __restrict__ out, int32_t n_head, int32_t group, int32_t head_dim, float scale) {
  const int32_t h = blockIdx.x, t = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n_embd = static_cast<int64_t>(n_head) * head_dim;
  const float* qh = q + t * n_embd + static_cast<int64_t>(h) * head_dim;
  const int32_t n_keys = m.pos[t] + 1;
  const int64_t kv_head_off = static_cast<int64_t>(h / group) * head_dim;
  const __half* base = reinterpret_cast<const __half*>(c.data);

  float qv[DPL], acc[DPL];
#pragma unroll
  for (int j = 0; j < DPL; ++j) {
    const int d = lane + 32 * j;
    qv[j] = d < head_dim ? qh[d] * scale : 0.0f;
    acc[j] = 0.0f;
  }
  float mx = -INFINITY, l = 0.0f;
  for (int32_t p = warp; p < n_keys; p += kAttnWarps) {
    const int64_t off = k_row_offset(c, m, t, layer, p) + kv_head_off;
    const __half* kr = base + off;
    const __half* vr = base + off + c.layer_elems / 2;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < DPL; ++j) {
      const int d = lane + 32 * j;
      if (d < head_dim) s = fmaf(qv[j], __half2float(kr[d]), s);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float m_new = fmaxf(mx, s);
    const float corr = expf(mx - m_new);  // mx = -inf on the first key: 0
    const float w = expf(s - m_new);
    l = l * corr + w;
#pragma unroll
    for (int j = 0; j < DPL; ++j) {
      const int d = lane + 32 * j;
      const float vv = d < head_dim ? __half2float(vr[d]) : 0.0f;
      acc[j] = acc[j] * corr + w * vv;
    }
    mx = m_new;
  }

  // Merge the warps' states: out = sum_w e^(m_w - M) acc_w / sum_w e^(m_w - M) l_w.
  __shared__ float s_m[kAttnWarps], s_l[kAttnWarps];
  __shared__ float s_acc[kAttnWarps][kMaxHeadDim];
  if (lane == 0) {
    s_m[warp] = mx;
    s_l[warp] = l;
  }
#pragma unroll
  for (int j = 0; j < DPL; ++j) {
    const int d = lane + 32 * j;
    if (d < head_dim) s_acc[warp][d] = acc[j];
  }
  __syncthreads();
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) M = fmaxf(M, s_m[w]);  // finite: key 0 belongs to warp 0
  float L = 0.0f, f[kAttnWarps];
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) {
    f[w] = s_l[w] > 0.0f ? expf(s_m[w] - M) : 0.0f;  // warps without keys contribute nothing
    L += f[w] * s_l[w];
  }
  const float inv = 1.0f / L;
  float* oh = out + t * n_embd + static_cast<int64_t>(h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kAttnWarps; ++w) sum += f[w] * s_acc[w][d];
    oh[d] = sum * inv;
  }
}

}  // namespace

void kv_write(const PagedCache& cache, const BatchMeta& meta, int32_t layer, const float* k, const float* v,
              int32_t n_tokens, cudaStream_t stream) {
  if (n_tokens <= 0) return;
  kv_write_kernel<<<static_cast<unsigned>(n_tokens), 256, 0, stream>>>(cache, meta, layer, k, v);
  NEXUS_CUDA_CHECK_LAUNCH();
}

void paged_attention(const PagedCache& cache, const BatchMeta& meta, int32_t layer, const float* q, float* out,
                     int32_t n_tokens, int32_t n_head, int32_t n_head_kv, int32_t head_dim, cudaStream_t stream) {
  if (n_tokens <= 0) return;
  if (head_dim <= 0 || head_dim > kMaxHeadDim) throw Error("paged_attention: head_dim must be in [1, 256]");
  if (n_head_kv <= 0 || n_head % n_head_kv != 0) throw Error("paged_attention: n_head must be a multiple of n_head_kv");
  if (n_tokens > 65535) throw Error("paged_attention: too many tokens in one launch");
  const dim3 grid(static_cast<unsigned>(n_head), static_cast<unsigned>(n_tokens));
  const int group = n_head / n_head_kv;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  const int threads = kAttnWarps * 32;
  if (head_dim <= 32)
    paged_attention_kernel<1><<<grid, threads, 0, stream>>>(cache, meta, layer, q, out, n_head, group, head_dim, scale);
  else if (head_dim <= 64)
    paged_attention_kernel<2><<<grid, threads, 0, stream>>>(cache, meta, layer, q, out, n_head, group, head_dim, scale);
  else if (head_dim <= 128)
    paged_attention_kernel<4><<<grid, threads, 0, stream>>>(cache, meta, layer, q, out, n_head, group, head_dim, scale);
  else
    paged_attention_kernel<8><<<grid, threads, 0, stream>>>(cache, meta, layer, q, out, n_head, group, head_dim, scale);
  NEXUS_CUDA_CHECK_LAUNCH();
}

}  // namespace nexus::cuda
