// Reference products of the K-quants (Q2_K .. Q6_K) with Q8_K activations
// (gemm_ref.h), following ggml's ggml_vec_dot_q*_K_q8_K reference loops
// (ggml-cpu/quants.c). Per super-block of one (row, token):
//   isum = sum over sub-blocks s of scale[s] * (q . x_q over s)      (int32)
//   msum = sum over sub-blocks s of min[s] * bsums[s]               (int32)
//   acc = fma(d * x.d, isum, acc), then acc = fma(-(dmin * x.d), msum, acc)
// (float32; isum and msum rounded to float32 first). Both integer sums are
// exact (|isum| < 2^28 for Q6_K, the widest), so the result differs from
// ggml's scalar loops, which keep 8 float lanes per row, only by float32
// rounding. Super-blocks are added in order, one float accumulator per (row,
// token). The two explicit fused multiply-adds fix every rounding, so the
// bits do not depend on the compiler's contraction, and the SIMD kernels,
// which sum the same integers exactly, reproduce them (gemm_kquants.h).
#include "kernels/gemm_ref.h"

#include <cmath>

#include "kernels/act_quant.h"
#include "kernels/kquant_unpack.h"

namespace nexus {
namespace {

template <class Block, bool kHasMin>
void kquant_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x,
                int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t nb = n_cols / kQK_K;
  const auto* act = static_cast<const BlockQ8K*>(x);
  KQuantInts u;
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const Block*>(w + r * row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) y[t * ldy + r] = 0.0f;
    // Each weight block is unpacked once and used by every token.
    for (int64_t b = 0; b < nb; ++b) {
      unpack(wb[b], u);
      const float d = fp16_to_fp32(wb[b].d);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const BlockQ8K& a = act[t * nb + b];
        int32_t isum = 0;
        for (int s = 0; s < 16; ++s) {
          int32_t dot = 0;
          for (int l = 0; l < 16; ++l) dot += u.q[16 * s + l] * a.qs[16 * s + l];
          isum += u.scale[s] * dot;
        }
        float& acc = y[t * ldy + r];
        acc = std::fma(d * a.d, static_cast<float>(isum), acc);
        if constexpr (kHasMin) {
          int32_t msum = 0;
          for (int s = 0; s < 16; ++s) msum += u.min[s] * a.bsums[s];
          const float dmin = fp16_to_fp32(wb[b].dmin);
          acc = std::fma(-(dmin * a.d), static_cast<float>(msum), acc);
        }
      }
    }
  }
}

}  // namespace

#define NEXUS_KQUANT_REF(name, Block, has_min)                                                                  \
  void gemm_ref_##name(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x, \
                       int64_t n_tokens, float* y, int64_t ldy) {                                                 \
    kquant_ref<Block, has_min>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);                               \
  }
NEXUS_KQUANT_REF(q2_k, BlockQ2_K, true)
NEXUS_KQUANT_REF(q3_k, BlockQ3_K, false)
NEXUS_KQUANT_REF(q4_k, BlockQ4_K, true)
NEXUS_KQUANT_REF(q5_k, BlockQ5_K, true)
NEXUS_KQUANT_REF(q6_k, BlockQ6_K, false)
#undef NEXUS_KQUANT_REF

}  // namespace nexus
