// Reference product kernels for Q4_1, Q5_0, Q5_1, IQ4_NL (activations
// BlockQ8Act) and IQ4_XS (activations BlockQ8K): gemm_ref.h, the GemmFn
// contract of weight_kernels.h. One (row, token) at a time; per block (or
// IQ4_XS sub-block of 32) an exact int32 sum, then float32 scaling in the
// order of ggml's reference loops (ggml-cpu quants.c, *_generic):
//
//   Q4_1, Q5_1 (vec_dot_q4_1_q8_1): acc += (d_w * d_x) * isum + m_w * s_x
//   Q5_0, IQ4_NL (vec_dot_q5_0_q8_0, vec_dot_iq4_nl_q8_0): acc += (d_w * d_x) * isum
//   IQ4_XS (vec_dot_iq4_xs_q8_K): per sub-block acc += ((d_w * d_x) * (scale - 32)) * isum
//
// s_x = d_x * qsum is the activation block's sum as ggml's block_q8_1 keeps
// it (d * sum), here in float32 (ggml stores it rounded to fp16).
#include <cstring>

#include "kernels/act_quant.h"
#include "kernels/gemm_ref.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

// Signed integer value j (0..31) of a weight block, as its dot product uses it.
struct Q4_1Values {
  using Block = BlockQ4_1;
  static int at(const Block& b, int j) { return j < 16 ? b.qs[j] & 0x0f : b.qs[j - 16] >> 4; }
};
struct Q5_0Values {
  using Block = BlockQ5_0;
  static int at(const Block& b, int j) {
    const int nibble = j < 16 ? b.qs[j] & 0x0f : b.qs[j - 16] >> 4;
    return (nibble | static_cast<int>((q5_fifth_bits(b.qh) >> j & 1) << 4)) - 16;
  }
};
struct Q5_1Values {
  using Block = BlockQ5_1;
  static int at(const Block& b, int j) {
    const int nibble = j < 16 ? b.qs[j] & 0x0f : b.qs[j - 16] >> 4;
    return nibble | static_cast<int>((q5_fifth_bits(b.qh) >> j & 1) << 4);
  }
};
struct Iq4NlValues {
  using Block = BlockIq4Nl;
  static int at(const Block& b, int j) { return kIq4nlValues[j < 16 ? b.qs[j] & 0x0f : b.qs[j - 16] >> 4]; }
};

template <class V>
int32_t block_dot(const typename V::Block& w, const BlockQ8Act& x) {
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += V::at(w, j) * x.qs[j];
  return isum;
}

// The block's scaled contribution; the min term only for types with m.
template <class V>
float block_term(const typename V::Block& w, const BlockQ8Act& x) {
  const float isum = static_cast<float>(block_dot<V>(w, x));
  if constexpr (requires { w.m; }) {
    return (fp16_to_fp32(w.d) * x.d) * isum + fp16_to_fp32(w.m) * (x.d * static_cast<float>(x.qsum));
  } else {
    return (fp16_to_fp32(w.d) * x.d) * isum;
  }
}

template <class V>
void blocks32_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* xv,
                  int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t n_blocks = n_cols / 32;
  const auto* x = static_cast<const BlockQ8Act*>(xv);
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const typename V::Block*>(w + r * row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const BlockQ8Act* xb = x + t * n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) acc += block_term<V>(wb[b], xb[b]);
      y[t * ldy + r] = acc;
    }
  }
}

// IQ4_XS sub-block ib: 6-bit scale minus 32 (as dequantize_row_iq4_xs).
int iq4_xs_scale(const BlockIq4Xs& b, int ib) {
  const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
  const int hi = (b.scales_h >> (2 * ib)) & 3;
  return (lo | hi << 4) - 32;
}

float iq4_xs_dot(const BlockIq4Xs& w, const BlockQ8K& x, float acc) {
  const float d4d8 = fp16_to_fp32(w.d) * x.d;
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* qs = w.qs + 16 * ib;
    const int8_t* q8 = x.qs + 32 * ib;
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += kIq4nlValues[qs[j] & 0x0f] * q8[j];
      isum += kIq4nlValues[qs[j] >> 4] * q8[j + 16];
    }
    const float dl = d4d8 * static_cast<float>(iq4_xs_scale(w, ib));
    acc += dl * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_ref_q4_1) {
  blocks32_ref<Q4_1Values>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_ref_q5_0) {
  blocks32_ref<Q5_0Values>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_ref_q5_1) {
  blocks32_ref<Q5_1Values>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_ref_iq4_nl) {
  blocks32_ref<Iq4NlValues>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}

void gemm_ref_iq4_xs(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* xv,
                     int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t n_super = n_cols / kQK_K;
  const auto* x = static_cast<const BlockQ8K*>(xv);
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const BlockIq4Xs*>(w + r * row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const BlockQ8K* xb = x + t * n_super;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_super; ++b) acc = iq4_xs_dot(wb[b], xb[b], acc);
      y[t * ldy + r] = acc;
    }
  }
}

}  // namespace nexus
