// Dequantization of the K-quants (Q2_K .. Q6_K) to float32, with ggml's
// arithmetic (ggml-quants.c, dequantize_row_q*_K): per sub-block a float
// scale dl = d * scale and, for the types with mins, ml = dmin * min; then
// value = dl * q - ml, or dl * q. Layouts: kquant_unpack.h.
#include "kernels/dequant.h"
#include "kernels/kquant_unpack.h"

namespace nexus {
namespace {

template <class Block, bool kHasMin>
void dequantize_kquant(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const Block*>(src);
  KQuantInts u;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const Block& b = blocks[i];
    unpack(b, u);
    const float d = fp16_to_fp32(b.d);
    float* out = dst + i * kQK_K;
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(u.scale[s]);
      if constexpr (kHasMin) {
        const float ml = fp16_to_fp32(b.dmin) * static_cast<float>(u.min[s]);
        for (int l = 0; l < 16; ++l) out[16 * s + l] = dl * static_cast<float>(u.q[16 * s + l]) - ml;
      } else {
        for (int l = 0; l < 16; ++l) out[16 * s + l] = dl * static_cast<float>(u.q[16 * s + l]);
      }
    }
  }
}

}  // namespace

void dequantize_row_q2_k(const void* src, float* dst, int64_t n) { dequantize_kquant<BlockQ2_K, true>(src, dst, n); }
void dequantize_row_q3_k(const void* src, float* dst, int64_t n) { dequantize_kquant<BlockQ3_K, false>(src, dst, n); }
void dequantize_row_q4_k(const void* src, float* dst, int64_t n) { dequantize_kquant<BlockQ4_K, true>(src, dst, n); }
void dequantize_row_q5_k(const void* src, float* dst, int64_t n) { dequantize_kquant<BlockQ5_K, true>(src, dst, n); }
void dequantize_row_q6_k(const void* src, float* dst, int64_t n) { dequantize_kquant<BlockQ6_K, false>(src, dst, n); }

}  // namespace nexus
