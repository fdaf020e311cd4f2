// IQ4_NL and IQ4_XS quantizers: ggml's quantize_row_iq4_nl_impl as
// llama-quantize calls it without an importance matrix (quantize_iq4_nl /
// quantize_iq4_xs: weights x^2, 7 scale trials either side). Codes index
// the 16 non-uniform levels kIq4nlValues; for each block of 32 the scale is
// the weighted least-squares fit of the nearest levels, over 15 trial
// scales. IQ4_XS then quantizes its 8 block scales to 6 bits against one
// fp16 super-block scale and re-picks every code with the scale it will be
// decoded with.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quant_search.h"
#include "model/quantize_types.h"

namespace nexus::quant {
namespace {

constexpr int kBlock = 32;
constexpr int kTrials = 7;  // ggml's ntry in quantize_iq4_nl / quantize_iq4_xs

// Index of the level nearest to v (ggml's best_index_int8): binary search
// in the sorted levels; on an exact midpoint the upper level wins.
int nearest_level(float v) {
  const int8_t* val = kIq4nlValues;
  if (v <= val[0]) return 0;
  if (v >= val[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < val[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - val[hi - 1] < val[hi] - v ? hi - 1 : hi;
}

// The scale of one block of 32 (0 when max |x| < kGroupMaxEps); codes are
// left in L only where the caller does not recompute them. The first trial
// maps the signed value of largest magnitude to level -127; then, with id =
// (t + kIq4nlValues[0]) / max for t = -7..7, the scale sum(w q x) / sum(w q^2)
// of the nearest levels q is kept when it fits better.
float block_scale(const float* xb, uint8_t* L) {
  float weight[kBlock];
  for (int j = 0; j < kBlock; ++j) weight[j] = xb[j] * xb[j];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float ax = std::fabs(xb[j]);
    if (ax > amax) {
      amax = ax;
      max = xb[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;

  const float v0 = static_cast<float>(kIq4nlValues[0]);
  float d = -max / v0;
  float id = 1.0f / d;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const int l = nearest_level(id * xb[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = static_cast<float>(kIq4nlValues[l]);
    sumqx += weight[j] * q * xb[j];
    sumq2 += weight[j] * q * q;
  }
  // ggml of February 2025 divides unguarded; sumq2 > 0 here since the
  // largest value has weight amax^2 > 0 and a nonzero level.
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int t = -kTrials; t <= kTrials; ++t) {
    id = static_cast<float>(t + kIq4nlValues[0]) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      const float q = static_cast<float>(kIq4nlValues[nearest_level(id * xb[j])]);
      sumqx += weight[j] * q * xb[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Byte j of each 16 holds block value j in its low nibble, j + 16 in its high one.
void pack_nibbles(const uint8_t* L, uint8_t* qs, int n) {
  for (int i = 0; i < n / 32; ++i)
    for (int j = 0; j < 16; ++j) qs[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* x, BlockIq4Nl* y, int64_t nb) {
  uint8_t L[kBlock];
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    const float d = block_scale(x, L);
    y[i].d = fp32_to_fp16(d);
    // Codes re-picked with the unrounded scale, as ggml does for ntry > 0.
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kBlock; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
    pack_nibbles(L, y[i].qs, kBlock);
  }
}

void quantize_iq4_xs(const float* x, BlockIq4Xs* y, int64_t nb) {
  constexpr int kBlocks = kQK_K / kBlock;
  uint8_t L[kQK_K];
  float scales[kBlocks];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max_scale = 0.0f, amax_scale = 0.0f;  // the signed block scale of largest magnitude
    for (int ib = 0; ib < kBlocks; ++ib) {
      scales[ib] = block_scale(x + kBlock * ib, L + kBlock * ib);
      const float a = std::fabs(scales[ib]);
      if (a > amax_scale) {
        amax_scale = a;
        max_scale = scales[ib];
      }
    }
    // 6-bit block scales l - 32 of d = max_scale / -32: the low nibble of
    // block ib in scales_l[ib / 2] (low half for even ib), the top two bits
    // in scales_h bits 2 ib, 2 ib + 1.
    const float d = -max_scale / 32.0f;
    y[i].d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t scales_h = 0;
    for (int ib = 0; ib < kBlocks; ++ib) {
      int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
      const float* xb = x + kBlock * ib;
      for (int j = 0; j < kBlock; ++j) L[kBlock * ib + j] = static_cast<uint8_t>(nearest_level(idl * xb[j]));
      l += 32;
      if (ib % 2 == 0)
        y[i].scales_l[ib / 2] = static_cast<uint8_t>(l & 0xf);
      else
        y[i].scales_l[ib / 2] |= static_cast<uint8_t>((l & 0xf) << 4);
      scales_h |= static_cast<uint16_t>((l >> 4) << (2 * ib));
    }
    y[i].scales_h = scales_h;
    pack_nibbles(L, y[i].qs, kQK_K);
  }
}

}  // namespace nexus::quant
