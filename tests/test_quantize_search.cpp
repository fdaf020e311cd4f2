// The vectorised scale searches of the reference quantizers against plain
// scalar transcriptions of ggml's loops (one candidate at a time, as in
// ggml-quants.c), on inputs the shared model files never produce: zeros,
// constants, one sign only, integers (exact rounding ties), tiny and huge
// magnitudes, lone outliers. Results must be bit-identical. Also the bytes
// of an all-zero row for every type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant_blocks.h"
#include "model/quant_search.h"
#include "model/quantize_ref.h"
#include "model/quantize_types.h"

namespace nexus {
namespace {

using quant::nearest_int;

int clampi(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

// ---- oracles: ggml's loops, one candidate scale at a time -------------------

float oracle_qkx2(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min, float rmin,
                  float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  auto err_of = [&](float d) { return use_mad ? std::fabs(d) : d * d; };
  float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clampi(nearest_int(iscale * (x[i] - min)), 0, nmax));
    best += w[i] * err_of(scale * L[i] + min - x[i]);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  uint8_t Laux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float e = 0;
      for (int i = 0; i < n; ++i) e += w[i] * err_of(this_scale * Laux[i] + this_min - x[i]);
      if (e < best) {
        std::copy(Laux, Laux + n, L);
        best = e;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

float oracle_qx_rmse1(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < quant::kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max, sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// best_index_int8: binary search, then the nearer neighbour in float arithmetic.
int oracle_level(float x) {
  const int8_t* val = kIq4nlValues;
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) mu = mav; else ml = mav;
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// quantize_row_iq4_nl_impl without importance weights, ntry = 7.
void oracle_iq4(int super_block, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l) {
  const int8_t* values = kIq4nlValues;
  float scales[8], weight[32];
  uint8_t L[256] = {};
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < super_block / 32; ++ib) {
    const float* xb = x + 32 * ib;
    uint8_t* Lb = L + 32 * ib;
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    if (amax < quant::kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = -max / values[0], id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = oracle_level(id * xb[j]);
      Lb[j] = static_cast<uint8_t>(l);
      const float q = values[l];
      sumqx += weight[j] * q * xb[j];
      sumq2 += weight[j] * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < 32; ++j) {
        const float q = values[oracle_level(id * xb[j])];
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    if (std::fabs(d) > amax_scale) {
      amax_scale = std::fabs(d);
      max_scale = d;
    }
  }
  if (super_block > 32) {
    *scales_h = 0;
    const float d = -max_scale / 32, id = d ? 1 / d : 0.f;
    *dh = fp32_to_fp16(d);
    for (int ib = 0; ib < super_block / 32; ++ib) {
      int l = clampi(nearest_int(id * scales[ib]), -32, 31);
      const float dl = d * l, idl = dl ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[32 * ib + j] = static_cast<uint8_t>(oracle_level(idl * x[32 * ib + j]));
      l += 32;
      if (ib % 2 == 0) scales_l[ib / 2] = static_cast<uint8_t>(l & 0xf);
      else scales_l[ib / 2] |= static_cast<uint8_t>((l & 0xf) << 4);
      *scales_h |= static_cast<uint16_t>((l >> 4) << 2 * (ib % 8));
    }
  } else {
    *dh = fp32_to_fp16(scales[0]);
    const float id = scales[0] ? 1 / scales[0] : 0;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(oracle_level(id * x[j]));
  }
  for (int i = 0; i < super_block / 32; ++i)
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

// ---- inputs -------------------------------------------------------------------

// Sub-blocks of n values in many shapes; each case is a different generator.
std::vector<float> tricky_values(int n, int which, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-8, 8), idx(0, n - 1);
  std::vector<float> x(n);
  switch (which % 12) {
    case 0: for (float& v : x) v = 0.0f; break;
    case 1: for (float& v : x) v = 0.75f; break;                         // constant > 0: min clamps to 0
    case 2: for (float& v : x) v = -0.5f; break;                         // constant < 0
    case 3: for (float& v : x) v = std::fabs(nd(rng)) * 0.02f; break;    // one sign
    case 4: for (float& v : x) v = -std::fabs(nd(rng)) * 0.02f; break;
    case 5: for (float& v : x) v = static_cast<float>(small(rng)); break;  // exact ties
    case 6: for (float& v : x) v = static_cast<float>(small(rng)) * 0.5f; break;
    case 7: for (float& v : x) v = nd(rng) * 1e-20f; break;               // below kGroupMaxEps
    case 8: for (float& v : x) v = nd(rng) * 1e20f; break;
    case 9: for (float& v : x) v = 0.0f; x[idx(rng)] = nd(rng); break;    // one nonzero
    case 10: for (float& v : x) v = nd(rng) * 0.01f; x[idx(rng)] = 3.0f; break;  // outlier
    default: for (float& v : x) v = nd(rng) * 0.05f; break;
  }
  return x;
}

constexpr int kCases = 12 * 200;

TEST(QuantizeSearch, Qkx2MatchesTheScalarLoopBitForBit) {
  std::mt19937 rng(7);
  struct Params { int n, nmax; float rmin; int nstep; bool mad; };
  // Q2_K, Q4_K, Q5_K's settings, and short searches.
  const Params ps[] = {{16, 3, -0.5f, 15, true}, {32, 15, -1.0f, 20, false}, {32, 31, -0.5f, 15, false},
                       {32, 15, -1.0f, 0, false}, {16, 7, -0.5f, 3, true}, {32, 15, -1.0f, 22, false}};
  for (int c = 0; c < kCases; ++c) {
    for (const Params& p : ps) {
      const std::vector<float> x = tricky_values(p.n, c, rng);
      std::vector<float> w(p.n);
      for (int i = 0; i < p.n; ++i) w[i] = p.mad ? std::fabs(x[i]) : 0.1f + std::fabs(x[i]);
      uint8_t L1[32], L2[32];
      float m1, m2;
      const float s1 = quant::make_qkx2_quants(p.n, p.nmax, x.data(), w.data(), L1, &m1, p.rmin, 0.1f, p.nstep, p.mad);
      const float s2 = oracle_qkx2(p.n, p.nmax, x.data(), w.data(), L2, &m2, p.rmin, 0.1f, p.nstep, p.mad);
      ASSERT_EQ(std::memcmp(&s1, &s2, 4), 0) << "case " << c << " nmax " << p.nmax << ": " << s1 << " vs " << s2;
      ASSERT_EQ(std::memcmp(&m1, &m2, 4), 0) << "case " << c << " nmax " << p.nmax;
      ASSERT_EQ(std::memcmp(L1, L2, p.n), 0) << "case " << c << " nmax " << p.nmax;
    }
  }
}

TEST(QuantizeSearch, QxMatchesTheScalarLoopBitForBit) {
  std::mt19937 rng(8);
  for (int c = 0; c < kCases; ++c) {
    const std::vector<float> x = tricky_values(16, c, rng);
    int8_t L1[16], L2[16];
    const float s1 = quant::make_qx_quants_rmse1(16, 32, x.data(), L1);
    const float s2 = oracle_qx_rmse1(16, 32, x.data(), L2);
    ASSERT_EQ(std::memcmp(&s1, &s2, 4), 0) << "case " << c << ": " << s1 << " vs " << s2;
    ASSERT_EQ(std::memcmp(L1, L2, 16), 0) << "case " << c;
  }
}

TEST(QuantizeSearch, Iq4LevelMatchesTheBinarySearchEverywhere) {
  // Every float near each midpoint and each level, plus a sweep and specials.
  std::vector<float> probes = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 1e-30f};
  for (int k = 0; k < 16; ++k) {
    const float lv = kIq4nlValues[k];
    const float mid = k < 15 ? 0.5f * (lv + static_cast<float>(kIq4nlValues[k + 1])) : lv;
    for (float c : {lv, mid}) {
      float u = c, d = c;
      for (int s = 0; s < 64; ++s, u = std::nextafter(u, INFINITY), d = std::nextafter(d, -INFINITY)) {
        probes.push_back(u);
        probes.push_back(d);
      }
    }
  }
  for (float v = -140.0f; v <= 140.0f; v += 0.0137f) probes.push_back(v);
  for (float v : probes) ASSERT_EQ(quant::iq4nl_nearest_level(v), oracle_level(v)) << v;
}

TEST(QuantizeSearch, Iq4RowsMatchTheScalarLoopByteForByte) {
  std::mt19937 rng(9);
  for (int c = 0; c < kCases; ++c) {
    // A super-block of 8 blocks, each of a different shape.
    std::vector<float> x;
    for (int b = 0; b < 8; ++b) {
      const std::vector<float> xb = tricky_values(32, c + 37 * b, rng);
      x.insert(x.end(), xb.begin(), xb.end());
    }
    if (c % 12 == 0) std::fill(x.begin(), x.end(), 0.0f);  // an all-zero super-block too

    BlockIq4Xs xs, want_xs;
    quantize_row_ref(GgmlType::IQ4_XS, x.data(), &xs, 256);
    oracle_iq4(256, x.data(), &want_xs.d, want_xs.qs, &want_xs.scales_h, want_xs.scales_l);
    ASSERT_EQ(std::memcmp(&xs, &want_xs, sizeof xs), 0) << "IQ4_XS case " << c;

    BlockIq4Nl nl[8], want_nl[8];
    quantize_row_ref(GgmlType::IQ4_NL, x.data(), nl, 256);
    uint16_t unused_h;
    for (int b = 0; b < 8; ++b) oracle_iq4(32, x.data() + 32 * b, &want_nl[b].d, want_nl[b].qs, &unused_h, nullptr);
    ASSERT_EQ(std::memcmp(nl, want_nl, sizeof nl), 0) << "IQ4_NL case " << c;
  }
}

// An all-zero row, field by field: ggml's arithmetic on zeros (a -0.0 scale
// where it divides a signed maximum, level 8 (= +1) for IQ4's zero).
TEST(QuantizeSearch, ZeroRowsGiveGgmlsBytes) {
  const std::vector<float> zeros(256, 0.0f);
  auto row = [&](GgmlType t) {
    std::vector<uint8_t> r(ggml_row_size(t, 256), 0xcd);
    quantize_row_ref(t, zeros.data(), r.data(), 256);
    return r;
  };
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
    for (uint8_t b : row(t)) ASSERT_EQ(b, 0) << ggml_type_name(t);
  }
  const auto q5 = row(GgmlType::Q5_0);
  for (int i = 0; i < 8; ++i) {
    BlockQ5_0 b;
    std::memcpy(&b, q5.data() + i * sizeof b, sizeof b);
    EXPECT_EQ(b.d, 0x8000);  // 0 / -16
    for (uint8_t q : b.qh) EXPECT_EQ(q, 0xff);  // code 16 = fifth bit set, nibble 0
    for (uint8_t q : b.qs) EXPECT_EQ(q, 0x00);
  }
  const auto nl = row(GgmlType::IQ4_NL);
  for (int i = 0; i < 8; ++i) {
    BlockIq4Nl b;
    std::memcpy(&b, nl.data() + i * sizeof b, sizeof b);
    EXPECT_EQ(b.d, 0);
    for (uint8_t q : b.qs) EXPECT_EQ(q, 0x88);
  }
  BlockIq4Xs xs;
  const auto xsr = row(GgmlType::IQ4_XS);
  std::memcpy(&xs, xsr.data(), sizeof xs);
  EXPECT_EQ(xs.d, 0x8000);        // -0 / 32
  EXPECT_EQ(xs.scales_h, 0xaaaa);  // block scales 0 + 32: high bits 2
  for (uint8_t q : xs.scales_l) EXPECT_EQ(q, 0);
  for (uint8_t q : xs.qs) EXPECT_EQ(q, 0x88);
}

}  // namespace
}  // namespace nexus
