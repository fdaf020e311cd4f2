// Dequantization of Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS rows (dequant.h),
// following ggml-quants.c's dequantize_row_* value for value.
//
// Every product d * q below is exact in float32 (an fp16 scale has 11
// significant bits, q at most 5, IQ4_XS's (scale - 32) * level at most 5 + 7),
// so the only rounding is Q4_1 / Q5_1's "+ m": one float32 addition, the same
// with or without FMA contraction.
#include <cstring>

#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

// Value j's and value j + 16's fifth bit (q5_fifth_bits), as +16 (ggml's xh_0 / xh_1).
inline int fifth_low(uint32_t qh, int j) { return static_cast<int>((qh >> j) << 4 & 0x10); }
inline int fifth_high(uint32_t qh, int j) { return static_cast<int>((qh >> (j + 12)) & 0x10); }

// IQ4_XS sub-block ib's 6-bit scale: low 4 bits from nibble ib of scales_l,
// high 2 from bits 2 ib, 2 ib + 1 of scales_h; stored with a bias of 32.
inline int iq4_xs_scale(const BlockIq4Xs& b, int ib) {
  const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
  const int hi = (b.scales_h >> (2 * ib)) & 3;
  return (lo | hi << 4) - 32;
}

}  // namespace

void dequantize_row_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / 32; ++i, dst += 32) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0x0f) * d + m;
      dst[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / 32; ++i, dst += 32) {
    const float d = fp16_to_fp32(b[i].d);
    const uint32_t qh = q5_fifth_bits(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(((b[i].qs[j] & 0x0f) | fifth_low(qh, j)) - 16) * d;
      dst[j + 16] = static_cast<float>(((b[i].qs[j] >> 4) | fifth_high(qh, j)) - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / 32; ++i, dst += 32) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    const uint32_t qh = q5_fifth_bits(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0f) | fifth_low(qh, j)) * d + m;
      dst[j + 16] = static_cast<float>((b[i].qs[j] >> 4) | fifth_high(qh, j)) * d + m;
    }
  }
}

void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIq4Nl*>(src);
  for (int64_t i = 0; i < n / 32; ++i, dst += 32) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] & 0x0f]);
      dst[j + 16] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIq4Xs*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int ib = 0; ib < 8; ++ib, dst += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(b[i], ib));
      const uint8_t* qs = b[i].qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0x0f]);
        dst[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace nexus
