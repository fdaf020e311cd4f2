// The AVX-512 VNNI K-quant kernels, decode (x86/gemm_kquants_avx512.cpp) and
// prefill (x86/gemm_kquants_prefill_avx512.cpp), against the reference kernels (gemm_ref_kquants.cpp, themselves checked against
// float64 and hand-built blocks in test_quant_kquants.cpp): within a stated
// float32 rounding bound, the same bits for every token count and row
// split, and nothing written outside the asked rows. Skipped without
// AVX-512 VNNI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_ref.h"
#include "kernels/kquant_unpack.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/gemm_kquants_avx512.h"
#include "kernels/x86/gemm_kquants_prefill_avx512.h"

namespace nexus {
namespace {

struct KType {
  const char* name;
  size_t block_bytes;
  size_t d_offset;
  long dmin_offset;  // -1: no dmin
  int bias;          // what the kernel adds to q to make it unsigned (Q3_K 4, Q6_K 32)
  GemmFn ref, simd;
};

const KType kTypes[] = {
    {"Q2_K", sizeof(BlockQ2_K), offsetof(BlockQ2_K, d), static_cast<long>(offsetof(BlockQ2_K, dmin)), 0,
     gemm_ref_q2_k, gemm_q2_k_avx512},
    {"Q3_K", sizeof(BlockQ3_K), offsetof(BlockQ3_K, d), -1, 4, gemm_ref_q3_k, gemm_q3_k_avx512},
    {"Q4_K", sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), static_cast<long>(offsetof(BlockQ4_K, dmin)), 0,
     gemm_ref_q4_k, gemm_q4_k_avx512},
    {"Q5_K", sizeof(BlockQ5_K), offsetof(BlockQ5_K, d), static_cast<long>(offsetof(BlockQ5_K, dmin)), 0,
     gemm_ref_q5_k, gemm_q5_k_avx512},
    {"Q6_K", sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), -1, 32, gemm_ref_q6_k, gemm_q6_k_avx512},
};
const KType kPrefillTypes[] = {
    {"Q4_K", sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), static_cast<long>(offsetof(BlockQ4_K, dmin)), 0,
     gemm_ref_q4_k, gemm_q4_k_prefill_avx512},
    {"Q5_K", sizeof(BlockQ5_K), offsetof(BlockQ5_K, d), static_cast<long>(offsetof(BlockQ5_K, dmin)), 0,
     gemm_ref_q5_k, gemm_q5_k_prefill_avx512},
    {"Q6_K", sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), -1, 32, gemm_ref_q6_k, gemm_q6_k_prefill_avx512},
};

void put_half(uint8_t* p, float f) {
  const uint16_t v = fp32_to_fp16(f);
  std::memcpy(p, &v, 2);
}
float get_half(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return fp16_to_fp32(v);
}

KQuantInts unpack_block(const KType& k, const uint8_t* p) {
  KQuantInts u;
  const std::string n = k.name;
  if (n == "Q2_K") unpack(*reinterpret_cast<const BlockQ2_K*>(p), u);
  if (n == "Q3_K") unpack(*reinterpret_cast<const BlockQ3_K*>(p), u);
  if (n == "Q4_K") unpack(*reinterpret_cast<const BlockQ4_K*>(p), u);
  if (n == "Q5_K") unpack(*reinterpret_cast<const BlockQ5_K*>(p), u);
  if (n == "Q6_K") unpack(*reinterpret_cast<const BlockQ6_K*>(p), u);
  return u;
}

// A weight of random bytes with random non-zero scales, and quantized random
// activations (every sub-block scale, min and level value occurs).
struct Problem {
  const KType& k;
  int64_t n_rows, n_cols, n_tokens, nb;
  size_t row_bytes;
  std::vector<uint8_t> w;
  std::vector<BlockQ8K> x;

  Problem(const KType& type, int64_t rows, int64_t cols, int64_t tokens, uint32_t seed)
      : k(type), n_rows(rows), n_cols(cols), n_tokens(tokens), nb(cols / kQK_K), row_bytes(cols / kQK_K * type.block_bytes) {
    std::mt19937 rng(seed);
    w.resize(row_bytes * rows);
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> mag(1e-3f, 2e-2f);
    const auto scale = [&] { return (rng() & 1 ? 1.0f : -1.0f) * mag(rng); };
    for (size_t off = 0; off < w.size(); off += k.block_bytes) {
      put_half(&w[off + k.d_offset], scale());
      if (k.dmin_offset >= 0) put_half(&w[off + k.dmin_offset], scale());
    }
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> xf(static_cast<size_t>(cols * tokens));
    for (float& v : xf) v = nd(rng);
    x.resize(static_cast<size_t>(nb * tokens));
    quantize_act_q8k(xf.data(), x.data(), cols * tokens);
  }

  std::vector<float> run(GemmFn fn, int64_t r0, int64_t r1, int64_t t0, int64_t nt, int64_t ldy, float fill = 0.0f) const {
    std::vector<float> y(static_cast<size_t>(ldy * nt), fill);
    fn(w.data(), row_bytes, r0, r1, n_cols, x.data() + t0 * nb, nt, y.data(), ldy);
    return y;
  }
};

// For (row r, token t): the float64 dot and S = sum over super-blocks b of
// |d_b x.d_b| sum_v |scale_v| (|q_v + bias| + bias) |x_v| + |dmin_b x.d_b|
// sum_v |min_v| |x_v|, which bounds the absolute sum of every integer lane
// the kernel converts to float, times its float factor.
struct Exact {
  double dot = 0.0, s = 0.0;
};
Exact exact(const Problem& p, int64_t r, int64_t t) {
  Exact e;
  for (int64_t b = 0; b < p.nb; ++b) {
    const uint8_t* blk = p.w.data() + r * p.row_bytes + b * p.k.block_bytes;
    const KQuantInts u = unpack_block(p.k, blk);
    const BlockQ8K& a = p.x[static_cast<size_t>(t * p.nb + b)];
    const double d = static_cast<double>(get_half(blk + p.k.d_offset)) * a.d;
    const double dmin = p.k.dmin_offset >= 0 ? static_cast<double>(get_half(blk + p.k.dmin_offset)) * a.d : 0.0;
    for (int v = 0; v < kQK_K; ++v) {
      const int sc = u.scale[v / 16], mn = u.min[v / 16], q = u.q[v], xq = a.qs[v];
      e.dot += d * sc * q * xq - dmin * mn * xq;
      e.s += std::fabs(d) * std::abs(sc) * (std::abs(q + p.k.bias) + p.k.bias) * std::abs(xq) +
             std::fabs(dmin) * mn * std::abs(xq);
    }
  }
  return e;
}

// The decode kernel, per super-block and token, forms integer lanes exactly,
// rounds each to float once (vcvtdq2ps), scales it by fl(d x.d) (one
// rounding) and adds it into one of 16 float lanes by FMA (one rounding; the
// min term is a second FMA into the same lane, so a lane takes at most 2 nb
// additions). The 16 lanes are then summed by a 4-level tree. (The prefill
// kernel does the same with one integer sum per super-block and no tree.) Each term therefore carries
// at most 2 nb + 2 + 4 rounding factors (1 + e), |e| <= u = 2^-24, and
// |kernel - dot| <= gamma_{2 nb + 6} S. The reference is within (nb + 8) u
// S_ref of dot (test_quant_kquants.cpp), S_ref <= S. So |kernel - ref| <=
// (3 nb + 14) u S to first order; 3 nb + 16 covers the higher-order terms.
double kernel_bound(const Problem& p, double s) { return static_cast<double>(2 * p.nb + 7) * std::ldexp(1.0, -24) * s; }
double vs_ref_bound(const Problem& p, double s) { return static_cast<double>(3 * p.nb + 16) * std::ldexp(1.0, -24) * s; }

class KQuantAvx512 : public testing::TestWithParam<KType> {
 protected:
  void SetUp() override {
    if (!cpu_features().avx512_vnni) GTEST_SKIP() << "no AVX-512 VNNI (" << cpu_features().describe() << ")";
  }
};

TEST_P(KQuantAvx512, MatchesReferenceWithinRounding) {
  const KType& k = GetParam();
  for (int64_t n_cols : {256, 2048, 11008}) {
    const Problem p(k, 21, n_cols, 11, static_cast<uint32_t>(n_cols) + 3);
    const std::vector<float> got = p.run(k.simd, 0, p.n_rows, 0, p.n_tokens, p.n_rows);
    const std::vector<float> ref = p.run(k.ref, 0, p.n_rows, 0, p.n_tokens, p.n_rows);
    for (int64_t t = 0; t < p.n_tokens; ++t)
      for (int64_t r = 0; r < p.n_rows; ++r) {
        const Exact e = exact(p, r, t);
        const float g = got[t * p.n_rows + r];
        EXPECT_NEAR(g, e.dot, kernel_bound(p, e.s)) << "n_cols " << n_cols << " row " << r << " token " << t;
        EXPECT_NEAR(g, ref[t * p.n_rows + r], vs_ref_bound(p, e.s)) << "n_cols " << n_cols << " row " << r << " token " << t;
      }
  }
}

// Extreme codes: every activation -127 / +127 and the widest weight levels
// (all bits set, then all clear), where the int16 and int32 headroom of the
// integer lanes is smallest.
TEST_P(KQuantAvx512, ExtremeLevelsAndActivations) {
  const KType& k = GetParam();
  for (uint8_t fill : {uint8_t{0xff}, uint8_t{0x00}, uint8_t{0xaa}}) {
    Problem p(k, 17, 512, 9, 5);
    for (size_t off = 0; off < p.w.size(); off += k.block_bytes) {
      std::memset(&p.w[off], fill, k.block_bytes);
      put_half(&p.w[off + k.d_offset], 0.01f);
      if (k.dmin_offset >= 0) put_half(&p.w[off + k.dmin_offset], -0.02f);
    }
    for (size_t i = 0; i < p.x.size(); ++i) {
      // Mostly one sign per block, so the sums reach their extremes, with a
      // few values flipped, differently per block, so that no blocks cancel.
      BlockQ8K& b = p.x[i];
      const int sign = i % 3 ? 1 : -1;
      for (int v = 0; v < kQK_K; ++v) b.qs[v] = static_cast<int8_t>((v % (5 + i) == 0 ? -sign : sign) * 127);
      for (int s = 0; s < 16; ++s) {
        b.bsums[s] = 0;
        for (int l = 0; l < 16; ++l) b.bsums[s] = static_cast<int16_t>(b.bsums[s] + b.qs[16 * s + l]);
      }
      b.d = 0.5f;
    }
    const std::vector<float> got = p.run(k.simd, 0, p.n_rows, 0, p.n_tokens, p.n_rows);
    for (int64_t t = 0; t < p.n_tokens; ++t)
      for (int64_t r = 0; r < p.n_rows; ++r) {
        const Exact e = exact(p, r, t);
        EXPECT_NEAR(got[t * p.n_rows + r], e.dot, kernel_bound(p, e.s)) << "fill " << int(fill) << " row " << r << " token " << t;
      }
  }
}

// Each (row, token) has the same bits whatever the token count, the token's
// position in the call and the row range.
// (19 tokens: the decode kernel's 4-token tiles and the prefill kernel's
// 8-token tiles with every remainder; 37 rows: two 16-row panels and a part.)
TEST_P(KQuantAvx512, SameBitsForAnyTokenCountAndRowRange) {
  const KType& k = GetParam();
  const int64_t n = 19;
  const Problem p(k, 37, 1280, n, 17);
  const std::vector<float> all = p.run(k.simd, 0, p.n_rows, 0, n, p.n_rows);
  for (int64_t t0 = 0; t0 < n; ++t0)
    for (int64_t nt = 1; t0 + nt <= n; ++nt) {
      const std::vector<float> y = p.run(k.simd, 0, p.n_rows, t0, nt, p.n_rows);
      for (int64_t t = 0; t < nt; ++t)
        for (int64_t r = 0; r < p.n_rows; ++r)
          ASSERT_EQ(y[t * p.n_rows + r], all[(t0 + t) * p.n_rows + r]) << "t0 " << t0 << " nt " << nt << " row " << r;
    }
  for (int64_t split : {1, 5, 16, 18, 33}) {
    std::vector<float> y(all.size(), 0.0f);
    k.simd(p.w.data(), p.row_bytes, 0, split, p.n_cols, p.x.data(), n, y.data(), p.n_rows);
    k.simd(p.w.data(), p.row_bytes, split, p.n_rows, p.n_cols, p.x.data(), n, y.data(), p.n_rows);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], all[i]) << "split " << split << " at " << i;
  }
}

// 70 tokens: past the decode kernel's 64-token repacking chunk and several
// prefill tiles; each token as if computed alone.
TEST_P(KQuantAvx512, ManyTokensMatchOneAtATime) {
  const KType& k = GetParam();
  const Problem p(k, 5, 768, 70, 29);
  const std::vector<float> all = p.run(k.simd, 0, p.n_rows, 0, p.n_tokens, p.n_rows);
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    const std::vector<float> one = p.run(k.simd, 0, p.n_rows, t, 1, p.n_rows);
    for (int64_t r = 0; r < p.n_rows; ++r) ASSERT_EQ(one[r], all[t * p.n_rows + r]) << "token " << t << " row " << r;
  }
}

TEST_P(KQuantAvx512, WritesOnlyItsRowsAndTokens) {
  const KType& k = GetParam();
  const Problem p(k, 24, 512, 10, 23);
  const int64_t ldy = 27;
  const std::vector<float> y = p.run(k.simd, 2, 21, 0, p.n_tokens, ldy, -7.0f);
  const std::vector<float> all = p.run(k.simd, 0, 24, 0, p.n_tokens, ldy, -7.0f);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t r = 0; r < ldy; ++r) {
      if (r >= 2 && r < 21)
        EXPECT_EQ(y[t * ldy + r], all[t * ldy + r]);
      else
        EXPECT_EQ(y[t * ldy + r], -7.0f) << "row " << r << " token " << t;
    }
  // No tokens, or no rows: nothing written.
  std::vector<float> canary(static_cast<size_t>(ldy), -7.0f);
  k.simd(p.w.data(), p.row_bytes, 0, 24, p.n_cols, p.x.data(), 0, canary.data(), ldy);
  k.simd(p.w.data(), p.row_bytes, 5, 5, p.n_cols, p.x.data(), 1, canary.data(), ldy);
  for (float v : canary) EXPECT_EQ(v, -7.0f);
}

std::string type_name(const testing::TestParamInfo<KType>& i) { return i.param.name; }
INSTANTIATE_TEST_SUITE_P(Decode, KQuantAvx512, testing::ValuesIn(kTypes), type_name);
INSTANTIATE_TEST_SUITE_P(Prefill, KQuantAvx512, testing::ValuesIn(kPrefillTypes), type_name);

}  // namespace
}  // namespace nexus
