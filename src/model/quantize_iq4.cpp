// IQ4_NL and IQ4_XS quantizers: ggml's quantize_row_iq4_nl_impl as
// llama-quantize calls it without an importance matrix (quantize_iq4_nl /
// quantize_iq4_xs: weights x^2, 7 scale trials either side). Codes index
// the 16 non-uniform levels kIq4nlValues; for each block of 32 the scale is
// the weighted least-squares fit of the nearest levels, best of a starting
// scale and 15 trials (16 vector lanes). IQ4_XS then quantizes its 8 block scales to 6 bits against one
// fp16 super-block scale and re-picks every code with the scale it will be
// decoded with.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "model/quant_search.h"
#include "model/quant_simd.h"
#include "model/quantize_types.h"

namespace nexus::quant {
namespace {

constexpr int kBlock = 32;
constexpr int kTrials = 7;  // ggml's ntry in quantize_iq4_nl / quantize_iq4_xs

// ggml picks the level nearest to v by binary search (best_index_int8):
// below level 0 -> 0, above level 15 -> 15, else for v in [a, b) between
// neighbours, a when fl(v - a) < fl(b - v), b otherwise. Both sides are
// monotone in v, so "a" holds exactly below one float threshold T in (a, b];
// the index is then the number of thresholds <= v, counted branch-free as
// 15 - #(v < T) (which also gives ggml's 15 for a NaN).
constexpr float threshold_between(float a, float b) {
  // Floats as integers in their numeric order (-0 and +0 both 0).
  auto key = [](float f) -> int64_t {
    const int32_t bits = std::bit_cast<int32_t>(f);
    return bits >= 0 ? bits : -static_cast<int64_t>(bits & 0x7fffffff);
  };
  auto value = [](int64_t k) {
    return std::bit_cast<float>(static_cast<uint32_t>(k >= 0 ? k : 0x80000000 | -k));
  };
  int64_t lo = key(a), hi = key(b);  // picks a at lo, b at hi
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    const float v = value(mid);
    if (v - a < b - v)
      lo = mid;
    else
      hi = mid;
  }
  return value(hi);
}

struct LevelThresholds {
  float t[15];
};

constexpr LevelThresholds make_thresholds() {
  LevelThresholds r{};
  for (int k = 0; k < 15; ++k)
    r.t[k] = threshold_between(static_cast<float>(kIq4nlValues[k]), static_cast<float>(kIq4nlValues[k + 1]));
  return r;
}

constexpr LevelThresholds kThresholds = make_thresholds();

// The 16 lanes of a block's search: lane 0 the starting scale (the signed
// value of largest magnitude on level -127), lanes 1..15 the trials
// id = (t + kIq4nlValues[0]) / max, t = -7..7.
constexpr int kLanes = 2 * kTrials + 2;
static_assert(kLanes == 16);

// The scale of one block of 32 (0 when max |x| < kGroupMaxEps): for each
// candidate, codes are the nearest levels q to id * x and the weighted
// (w = x^2) least-squares scale sum(w q x) / sum(w q^2); the candidate with
// the largest sum(w q x)^2 / sum(w q^2) wins, the first on ties. Codes are
// picked afresh by the callers with the final scale.
float block_scale(const float* xb) {
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
  float id[kLanes];
  id[0] = 1.0f / (-max / v0);
  for (int t = -kTrials; t <= kTrials; ++t) id[t + kTrials + 1] = static_cast<float>(t + kIq4nlValues[0]) / max;

  constexpr int kVecs = kLanes / 8;
  F8 id8[kVecs], sqx[kVecs], sq2[kVecs];
  for (int v = 0; v < kVecs; ++v) {
    std::memcpy(&id8[v], id + 8 * v, sizeof id8[v]);
    sqx[v] = sq2[v] = splat(0.0f);
  }
  for (int j = 0; j < kBlock; ++j) {
    const F8 xj = splat(xb[j]), w = splat(xb[j] * xb[j]);
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) {
      const F8 al = id8[v] * xj;
      // q = level 15 minus the steps of every threshold above al.
      I8 down = splat_i(0);
      for (int k = 0; k < 15; ++k)
        down += (al < splat(kThresholds.t[k])) & splat_i(kIq4nlValues[k + 1] - kIq4nlValues[k]);
      const F8 q = to_float(splat_i(kIq4nlValues[15]) - down);
      const F8 wq = w * q;
      sqx[v] += wq * xj;
      sq2[v] += wq * q;
    }
  }
  float sumqx[kLanes], sumq2[kLanes];
  std::memcpy(sumqx, sqx, sizeof sumqx);
  std::memcpy(sumq2, sq2, sizeof sumq2);
  // ggml of February 2025 divides unguarded; sumq2 > 0 here since the
  // largest value has weight amax^2 > 0 and a nonzero level.
  float d = sumqx[0] / sumq2[0];
  float best = d * sumqx[0];
  for (int c = 1; c < kLanes; ++c)
    if (sumq2[c] > 0.0f && sumqx[c] * sumqx[c] > best * sumq2[c]) {
      d = sumqx[c] / sumq2[c];
      best = d * sumqx[c];
    }
  return d;
}

// Byte j of each 16 holds block value j in its low nibble, j + 16 in its high one.
void pack_nibbles(const uint8_t* L, uint8_t* qs, int n) {
  for (int i = 0; i < n / 32; ++i)
    for (int j = 0; j < 16; ++j) qs[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

int iq4nl_nearest_level(float v) {
  int below = 0;
  for (float t : kThresholds.t) below += v < t;
  return 15 - below;
}

void quantize_iq4_nl(const float* x, BlockIq4Nl* y, int64_t nb) {
  uint8_t L[kBlock];
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    const float d = block_scale(x);
    y[i].d = fp32_to_fp16(d);
    // Codes re-picked with the unrounded scale, as ggml does for ntry > 0.
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kBlock; ++j) L[j] = static_cast<uint8_t>(iq4nl_nearest_level(id * x[j]));
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
      scales[ib] = block_scale(x + kBlock * ib);
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
      for (int j = 0; j < kBlock; ++j) L[kBlock * ib + j] = static_cast<uint8_t>(iq4nl_nearest_level(idl * xb[j]));
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
