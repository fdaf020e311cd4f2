// Q2_K .. Q6_K reference quantizers: ggml's quantize_row_q{2,3,4,5,6}_K_ref,
// which llama-quantize runs when it has no importance matrix. Each
// super-block of 256 is quantized in three steps: a scale search per
// sub-block (model/quant_search.h), the sub-block scales (and minimums)
// quantized against one fp16 super-block scale, then every value requantized
// with the scale it will actually be decoded with. Packing follows
// kernels/quant_blocks.h.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quant_search.h"
#include "model/quantize_types.h"

namespace nexus::quant {
namespace {

// The 2-bit codes of 128 values share 32 bytes: byte l holds values l,
// l + 32, l + 64, l + 96 in bit pairs 0, 2, 4, 6 (Q2_K's qs, Q3_K's low bits).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128, qs += 32)
    for (int l = 0; l < 32; ++l)
      qs[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with asymmetric codes 0..nmax. Fills L with
// the final codes and writes d, dmin and the 12 packed scale bytes.
template <typename Block>
void quantize_scale_min_k(const float* x, Block* y, int nmax, float rmin, int nstep, uint8_t* L) {
  constexpr int kSub = 32;
  float scales[kQK_K / kSub], mins[kQK_K / kSub];
  float weights[kSub];
  float max_scale = 0.0f, max_min = 0.0f;  // scales are positive once the min is taken out
  for (int j = 0; j < kQK_K / kSub; ++j) {
    const float* xs = x + kSub * j;
    // Weights |x| + rms(x): large values matter more, small ones still count.
    float sum_x2 = 0.0f;
    for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / kSub);
    for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = make_qkx2_quants(kSub, nmax, xs, weights, L + kSub * j, &mins[j], rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }

  // 6-bit scales and mins. The first four sub-blocks keep theirs in the low
  // six bits of bytes 0..3 (scales) and 4..7 (mins); the last four put the
  // low nibbles in bytes 8..11 and the top two bits in bits 6..7 of bytes 0..7.
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // ggml stores nearest_int's result in a uint8_t before clamping to 63.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      y->scales[j] = ls[j];
      y->scales[j + 4] = lm[j];
    } else {
      y->scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
      y->scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      y->scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  y->d = fp32_to_fp16(max_scale / 63.0f);
  y->dmin = fp32_to_fp16(max_min / 63.0f);

  const float d_all = fp16_to_fp32(y->d), dmin_all = fp16_to_fp32(y->dmin);
  for (int j = 0; j < 8; ++j) {
    const float d = d_all * static_cast<float>(ls[j]);
    if (d == 0.0f) continue;  // keep the search's codes
    const float dm = dmin_all * static_cast<float>(lm[j]);
    for (int ii = 0; ii < kSub; ++ii) {
      const int l = nearest_int((x[kSub * j + ii] + dm) / d);
      L[kSub * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

void quantize_q2_K(const float* x, BlockQ2_K* y, int64_t nb) {
  constexpr int kSub = 16;
  constexpr float kQ4Scale = 15.0f;
  uint8_t L[kQK_K];
  float weights[kSub], mins[kQK_K / kSub], scales[kQK_K / kSub];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < kQK_K / kSub; ++j) {
      for (int l = 0; l < kSub; ++l) weights[l] = std::fabs(x[kSub * j + l]);
      scales[j] = make_qkx2_quants(kSub, 3, x + kSub * j, weights, L + kSub * j, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    // 4-bit scale (low nibble) and min (high nibble) per sub-block.
    if (max_scale > 0.0f) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < kQK_K / kSub; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = fp32_to_fp16(max_scale / kQ4Scale);
    } else {
      std::memset(y[i].scales, 0, sizeof y[i].scales);
      y[i].d = fp32_to_fp16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < kQK_K / kSub; ++j)
        y[i].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y[i].dmin = fp32_to_fp16(max_min / kQ4Scale);
    } else {
      y[i].dmin = fp32_to_fp16(0.0f);
    }
    const float d_all = fp16_to_fp32(y[i].d), dmin_all = fp16_to_fp32(y[i].dmin);
    for (int j = 0; j < kQK_K / kSub; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j] & 0xf);
      if (d == 0.0f) continue;
      const float dm = dmin_all * static_cast<float>(y[i].scales[j] >> 4);
      for (int ii = 0; ii < kSub; ++ii) {
        const int l = nearest_int((x[kSub * j + ii] + dm) / d);
        L[kSub * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_q3_K(const float* x, BlockQ3_K* y, int64_t nb) {
  constexpr int kSub = 16;
  int8_t L[kQK_K];
  float scales[kQK_K / kSub];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0.0f, amax = 0.0f;  // the signed scale of largest magnitude
    for (int j = 0; j < kQK_K / kSub; ++j) {
      scales[j] = make_q3_quants_rmse(kSub, 4, x + kSub * j, L + kSub * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = scales[j];
      }
    }

    // 6-bit scales biased by 32: low nibbles of sub-blocks 0..7 in the low
    // halves of bytes 0..7, of 8..15 in their high halves; the top two bits
    // of sub-block j in bytes 8 + j % 4, bit pair j / 4.
    std::memset(y[i].scales, 0, sizeof y[i].scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < kQK_K / kSub; ++j) {
        // ggml holds the rounded scale in an int8_t before clamping.
        int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = std::max(-32, std::min(31, l)) + 32;
        if (j < 8)
          y[i].scales[j] = static_cast<uint8_t>(l & 0xf);
        else
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y[i].d = fp32_to_fp16(1.0f / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.0f);
    }

    const float d_all = fp16_to_fp32(y[i].d);
    for (int j = 0; j < kQK_K / kSub; ++j) {
      const int lo = j < 8 ? y[i].scales[j] & 0xf : y[i].scales[j - 8] >> 4;
      const int hi = (y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      const float d = d_all * static_cast<float>((lo | (hi << 4)) - 32);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < kSub; ++ii) {
        const int l = nearest_int(x[kSub * j + ii] / d);
        L[kSub * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }

    // Codes 0..7: the third bit goes to hmask (value j -> byte j % 32, bit
    // j / 32), the low two bits to qs.
    std::memset(y[i].hmask, 0, sizeof y[i].hmask);
    uint8_t low[kQK_K];
    for (int j = 0; j < kQK_K; ++j) {
      if (L[j] > 3) y[i].hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
      low[j] = static_cast<uint8_t>(L[j] & 3);
    }
    pack_2bit(low, y[i].qs);
  }
}

void quantize_q4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quantize_scale_min_k(x, &y[i], 15, -1.0f, 20, L);
    // Nibbles: 32 bytes per 64 values, value l in the low half, l + 32 in the high.
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quantize_q5_K(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    quantize_scale_min_k(x, &y[i], 31, -0.5f, 15, L);
    // As Q4_K's nibbles; the fifth bit of value n + l (n = 64 k) goes to
    // qh[l] bit 2k, that of value n + 32 + l to bit 2k + 1.
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    uint8_t* ql = y[i].qs;
    for (int n = 0, k = 0; n < kQK_K; n += 64, ++k, ql += 32)
      for (int l = 0; l < 32; ++l) {
        const int a = L[n + l], b = L[n + l + 32];
        y[i].qh[l] |= static_cast<uint8_t>(((a >> 4) << (2 * k)) | ((b >> 4) << (2 * k + 1)));
        ql[l] = static_cast<uint8_t>((a & 0xf) | ((b & 0xf) << 4));
      }
  }
}

void quantize_q6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  constexpr int kSub = 16;
  int8_t L[kQK_K];
  float scales[kQK_K / kSub];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int j = 0; j < kQK_K / kSub; ++j) {
      scales[j] = make_qx_quants_rmse1(kSub, 32, x + kSub * j, L + kSub * j);
      const float a = std::fabs(scales[j]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    // int8 scales: the largest maps to -128 exactly, the opposite sign clamps at 127.
    const float iscale = -128.0f / max_scale;
    y[i].d = fp32_to_fp16(1.0f / iscale);
    for (int j = 0; j < kQK_K / kSub; ++j)
      y[i].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));

    const float d_all = fp16_to_fp32(y[i].d);
    for (int j = 0; j < kQK_K / kSub; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < kSub; ++ii) {
        const int l = nearest_int(x[kSub * j + ii] / d);
        L[kSub * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }

    // Codes 0..63 per 128 values: low nibbles of l and l + 64 share ql[l],
    // of l + 32 and l + 96 share ql[l + 32]; the four high bit pairs share qh[l].
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
  }
}

}  // namespace nexus::quant
