// Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS: dequantization against hand-built
// blocks, the reference product kernels against float64, the AVX2 / AVX-512
// kernels against the reference kernels and against themselves (same bits
// for any token count, token position and row range).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/gemm_ref.h"
#include "kernels/quant_blocks.h"
#include "kernels/weight_kernels.h"
#include "kernels/x86/gemm_legacy.h"

using namespace nexus;

namespace {

// byte j of a block's nibbles: value j = j (low), value j + 16 = 15 - j (high).
void fill_nibbles(uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
}

// Fifth bits of values 0, 3, 15 (low half: qh bits 0..15) and 16, 20, 31
// (high half: bits 16..31).
constexpr uint32_t kQh = 1u << 0 | 1u << 3 | 1u << 15 | 1u << 16 | 1u << 20 | 1u << 31;

}  // namespace

TEST(DequantLegacy, Q4_1AddsTheMinimum) {
  BlockQ4_1 b[2]{};
  b[0].d = fp32_to_fp16(0.5f);
  b[0].m = fp32_to_fp16(-3.25f);
  b[1].d = fp32_to_fp16(-2.0f);
  b[1].m = fp32_to_fp16(1.0f);
  fill_nibbles(b[0].qs);
  fill_nibbles(b[1].qs);
  float out[64];
  dequantize_row_q4_1(b, out, 64);
  EXPECT_EQ(out[0], -3.25f);        // 0 * 0.5 - 3.25
  EXPECT_EQ(out[5], -0.75f);        // 5 * 0.5 - 3.25
  EXPECT_EQ(out[16], 4.25f);        // 15 * 0.5 - 3.25
  EXPECT_EQ(out[31], -3.25f);       // 0 * 0.5 - 3.25
  EXPECT_EQ(out[32 + 15], -29.0f);  // 15 * -2 + 1
  EXPECT_EQ(out[32 + 17], -27.0f);  // 14 * -2 + 1
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * j - 3.25f) << j;
    EXPECT_EQ(out[j + 16], 0.5f * (15 - j) - 3.25f) << j;
    EXPECT_EQ(out[32 + j], -2.0f * j + 1.0f) << j;
  }
}

TEST(DequantLegacy, Q5_0FifthBitsOfBothHalves) {
  BlockQ5_0 b[2]{};
  b[0].d = fp32_to_fp16(2.0f);
  b[1].d = fp32_to_fp16(-0.25f);
  for (BlockQ5_0& blk : b) {
    fill_nibbles(blk.qs);
    std::memcpy(blk.qh, &kQh, 4);
  }
  float out[64];
  dequantize_row_q5_0(b, out, 64);
  EXPECT_EQ(out[0], 0.0f);          // (0 | 16) - 16
  EXPECT_EQ(out[1], -30.0f);        // (1 - 16) * 2
  EXPECT_EQ(out[3], 6.0f);          // (3 | 16) - 16 = 3
  EXPECT_EQ(out[14], -4.0f);        // 14 - 16
  EXPECT_EQ(out[15], 30.0f);        // (15 | 16) - 16 = 15
  EXPECT_EQ(out[16], 30.0f);        // value 16: high nibble 15, bit 16 set
  EXPECT_EQ(out[17], -4.0f);        // high nibble 14, no bit
  EXPECT_EQ(out[20], 22.0f);        // high nibble 11, bit 20: 27 - 16
  EXPECT_EQ(out[21], -12.0f);       // high nibble 10, no bit
  EXPECT_EQ(out[31], 0.0f);         // high nibble 0, bit 31: 16 - 16
  EXPECT_EQ(out[32 + 1], 3.75f);    // -15 * -0.25
  EXPECT_EQ(out[32 + 20], -2.75f);  // 11 * -0.25
}

TEST(DequantLegacy, Q5_1FifthBitsAndMinimum) {
  BlockQ5_1 b[2]{};
  b[0].d = fp32_to_fp16(0.25f);
  b[0].m = fp32_to_fp16(1.5f);
  b[1].d = fp32_to_fp16(0.5f);
  b[1].m = fp32_to_fp16(-8.0f);
  for (BlockQ5_1& blk : b) {
    fill_nibbles(blk.qs);
    std::memcpy(blk.qh, &kQh, 4);
  }
  float out[64];
  dequantize_row_q5_1(b, out, 64);
  EXPECT_EQ(out[0], 5.5f);        // 16 * 0.25 + 1.5
  EXPECT_EQ(out[1], 1.75f);       // 1 * 0.25 + 1.5
  EXPECT_EQ(out[15], 9.25f);      // 31 * 0.25 + 1.5
  EXPECT_EQ(out[16], 9.25f);      // high nibble 15 | bit 16 = 31
  EXPECT_EQ(out[17], 5.0f);       // 14 * 0.25 + 1.5
  EXPECT_EQ(out[20], 8.25f);      // 27 * 0.25 + 1.5
  EXPECT_EQ(out[31], 5.5f);       // 0 | 16 = 16
  EXPECT_EQ(out[32 + 15], 7.5f);  // 31 * 0.5 - 8
  EXPECT_EQ(out[32 + 2], -7.0f);  // 2 * 0.5 - 8
}

TEST(DequantLegacy, Iq4NlTable) {
  // ggml's kvalues_iq4nl, written out here again.
  const int8_t table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(kIq4nlValues[i], table[i]) << i;
  BlockIq4Nl b[2]{};
  b[0].d = fp32_to_fp16(0.5f);
  b[1].d = fp32_to_fp16(-4.0f);
  fill_nibbles(b[0].qs);
  fill_nibbles(b[1].qs);
  float out[64];
  dequantize_row_iq4_nl(b, out, 64);
  EXPECT_EQ(out[0], -63.5f);
  EXPECT_EQ(out[8], 0.5f);
  EXPECT_EQ(out[15], 56.5f);
  EXPECT_EQ(out[16], 56.5f);
  EXPECT_EQ(out[31], -63.5f);
  EXPECT_EQ(out[32 + 7], 40.0f);     // -10 * -4
  EXPECT_EQ(out[32 + 16], -452.0f);  // 113 * -4
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * table[j]) << j;
    EXPECT_EQ(out[j + 16], 0.5f * table[15 - j]) << j;
  }
}

// Sub-block scales (6 bits, stored + 32) 0, 63, 32, 33, 31, 48, 17, 50, i.e.
// -32, 31, 0, 1, -1, 16, -15, 18: both high bits set in sub-blocks 1, 5, 7.
TEST(DequantLegacy, Iq4XsSixBitScales) {
  const int scale[8] = {-32, 31, 0, 1, -1, 16, -15, 18};
  BlockIq4Xs b[2]{};
  for (BlockIq4Xs& blk : b) {
    // Low nibbles: sub-block 2k in the low half of byte k, 2k + 1 in the high.
    blk.scales_l[0] = 0xF0;  // 0, 15
    blk.scales_l[1] = 0x10;  // 0, 1
    blk.scales_l[2] = 0x0F;  // 15, 0
    blk.scales_l[3] = 0x21;  // 1, 2
    // High bits, 2 per sub-block from bit 0: 0, 3, 2, 2, 1, 3, 1, 3.
    blk.scales_h = 0b11'01'11'01'10'10'11'00;
    for (int ib = 0; ib < 8; ++ib)
      for (int j = 0; j < 16; ++j) blk.qs[16 * ib + j] = static_cast<uint8_t>(((j + ib) & 15) | (15 - j) << 4);
  }
  b[0].d = fp32_to_fp16(0.5f);
  b[1].d = fp32_to_fp16(-2.0f);
  std::vector<float> out(512);
  dequantize_row_iq4_xs(b, out.data(), 512);
  EXPECT_EQ(out[0], 2032.0f);               // 0.5 * -32 * -127
  EXPECT_EQ(out[32], -1612.0f);             // 0.5 * 31 * -104 (sub-block 1, nibble 1)
  EXPECT_EQ(out[64 + 16], 0.0f);            // scale 0
  EXPECT_EQ(out[128 + 16], -56.5f);         // 0.5 * -1 * 113
  EXPECT_EQ(out[256 + 160], 1120.0f);       // -2 * 16 * -35 (sub-block 5, nibble 5)
  EXPECT_EQ(out[256 + 224 + 31], 4572.0f);  // -2 * 18 * -127
  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk == 0 ? 0.5f : -2.0f;
    for (int ib = 0; ib < 8; ++ib)
      for (int j = 0; j < 16; ++j) {
        const float* o = out.data() + 256 * blk + 32 * ib;
        ASSERT_EQ(o[j], d * scale[ib] * kIq4nlValues[(j + ib) & 15]) << blk << " " << ib << " " << j;
        ASSERT_EQ(o[j + 16], d * scale[ib] * kIq4nlValues[15 - j]) << blk << " " << ib << " " << j;
      }
  }
}

namespace {

// One weight type under test: its layout and kernels.
struct LegacyType {
  std::string name;
  size_t block_bytes;
  int block_values;
  bool has_min;  // an fp16 m at byte 2 of each block
  bool q8k;      // activations BlockQ8K (else BlockQ8Act)
  DequantRowFn dequant;
  GemmFn ref, avx2, avx512;
};

const LegacyType kTypes[] = {
    {"q4_1", sizeof(BlockQ4_1), 32, true, false, dequantize_row_q4_1, gemm_ref_q4_1, gemm_q4_1_avx2, gemm_q4_1_avx512},
    {"q5_0", sizeof(BlockQ5_0), 32, false, false, dequantize_row_q5_0, gemm_ref_q5_0, gemm_q5_0_avx2, gemm_q5_0_avx512},
    {"q5_1", sizeof(BlockQ5_1), 32, true, false, dequantize_row_q5_1, gemm_ref_q5_1, gemm_q5_1_avx2, gemm_q5_1_avx512},
    {"iq4_nl", sizeof(BlockIq4Nl), 32, false, false, dequantize_row_iq4_nl, gemm_ref_iq4_nl, gemm_iq4_nl_avx2,
     gemm_iq4_nl_avx512},
    {"iq4_xs", sizeof(BlockIq4Xs), 256, false, true, dequantize_row_iq4_xs, gemm_ref_iq4_xs, gemm_iq4_xs_avx2,
     gemm_iq4_xs_avx512},
};

float random_scale(std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  const float v = fp16_to_fp32(fp32_to_fp16(u(rng)));
  return rng() & 1 ? v : -v;
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Random bytes for every quant, scale and fifth-bit field; non-zero fp16 d
// (and m) of either sign.
std::vector<uint8_t> random_weight(const LegacyType& k, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  const int64_t n_blocks = n_rows * n_cols / k.block_values;
  std::vector<uint8_t> w(static_cast<size_t>(n_blocks) * k.block_bytes);
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* blk = w.data() + i * k.block_bytes;
    put_half(blk, random_scale(rng, 0.002f, 0.02f));
    if (k.has_min) put_half(blk + 2, random_scale(rng, 0.01f, 0.2f));
  }
  return w;
}

// BlockQ8K rows (while quantize_act_q8k is written elsewhere): random quants
// in [-127, 127], a d of either sign, bsums consistent with the quants.
std::vector<BlockQ8K> random_q8k(int64_t n_blocks, std::mt19937& rng) {
  std::uniform_int_distribution<int> q(-127, 127);
  std::vector<BlockQ8K> x(static_cast<size_t>(n_blocks));
  for (BlockQ8K& b : x) {
    b.d = random_scale(rng, 0.005f, 0.02f);
    for (int8_t& v : b.qs) v = static_cast<int8_t>(q(rng));
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += b.qs[16 * g + j];
      b.bsums[g] = static_cast<int16_t>(s);
    }
  }
  return x;
}

// n_tokens activation rows in the type's format, and their exact values.
struct Activations {
  std::vector<BlockQ8Act> q8;
  std::vector<BlockQ8K> q8k;
  std::vector<double> values;  // [n_tokens, n_cols]
  const void* data() const { return q8k.empty() ? static_cast<const void*>(q8.data()) : q8k.data(); }
  // Token t's blocks.
  const void* token(int64_t t, int64_t n_cols) const {
    return q8k.empty() ? static_cast<const void*>(q8.data() + t * n_cols / 32) : q8k.data() + t * n_cols / 256;
  }
};

Activations random_activations(const LegacyType& k, int64_t n_tokens, int64_t n_cols, std::mt19937& rng) {
  Activations a;
  a.values.resize(static_cast<size_t>(n_tokens * n_cols));
  if (k.q8k) {
    a.q8k = random_q8k(n_tokens * n_cols / 256, rng);
    for (size_t i = 0; i < a.values.size(); ++i)
      a.values[i] = static_cast<double>(a.q8k[i / 256].d) * a.q8k[i / 256].qs[i % 256];
  } else {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(a.values.size());
    for (float& v : x) v = u(rng);
    a.q8.resize(x.size() / 32);
    quantize_act_q8(x.data(), a.q8.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < a.values.size(); ++i)
      a.values[i] = static_cast<double>(a.q8[i / 32].d) * a.q8[i / 32].qs[i % 32];
  }
  return a;
}

// Float32 rounding bound of one (row, token) result against the exact dot of
// the same quants and scales (u = 2^-24). Every kernel here forms terms -- an
// exact int32 sum (of a block, sub-block or SIMD lane) times its float scale,
// and Q4_1 / Q5_1's m_w * d_x * qsum -- whose magnitudes sum to at most
// M = sum_j (|w_j - m| + |m|) |x_j| (m: the block's minimum, 0 for the types
// without), and adds them up. Each term meets at most 3 roundings forming it
// (d_w * d_x, IQ4_XS's * (scale - 32), the product; s = d_x * qsum) and at most
// n_terms + 5 on its way into the sum: the reference's sequential sum has
// n_terms - 1 (+1 for the min term), the SIMD kernels' chains are shorter but
// add the min chain (n_terms), the even + odd (+ min) sums and the lane
// reduction (3 or 4). The float64 reference dequantizes Q4_1 / Q5_1 with one
// rounding (u |w_j|: at most u M in all). So |result - exact| <= (n_terms + 9) u M
// to first order in u (the rest is below 10^-5 of it), and two kernels differ
// by at most twice that. (Observed: 0.4 u M from exact, 1.3 u M between two.)
double rounding_bound(int64_t n_terms, double m_abs) { return (n_terms + 9.0) * std::ldexp(1.0, -24) * m_abs; }

struct Problem {
  int64_t n_rows, n_cols, n_tokens;
  std::vector<uint8_t> w;
  Activations x;
  std::vector<double> exact, bound;  // [n_tokens, n_rows]; bound: rounding_bound() of one kernel
};

Problem make_problem(const LegacyType& k, int64_t n_rows, int64_t n_cols, int64_t n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{
      n_rows, n_cols, n_tokens, random_weight(k, n_rows, n_cols, rng), random_activations(k, n_tokens, n_cols, rng),
      {},     {}};
  const size_t row_bytes = n_cols / k.block_values * k.block_bytes;
  const int64_t n_terms = n_cols / 32;
  std::vector<float> row(static_cast<size_t>(n_cols));
  p.exact.resize(static_cast<size_t>(n_tokens * n_rows));
  p.bound.resize(p.exact.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* wr = p.w.data() + r * row_bytes;
    k.dequant(wr, row.data(), n_cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double dot = 0, mag = 0;
      for (int64_t c = 0; c < n_cols; ++c) {
        uint16_t mh = 0;
        if (k.has_min) std::memcpy(&mh, wr + c / 32 * k.block_bytes + 2, 2);
        const double m = fp16_to_fp32(mh), xv = p.x.values[t * n_cols + c];
        dot += row[c] * xv;
        mag += (std::abs(row[c] - m) + std::abs(m)) * std::abs(xv);
      }
      p.exact[t * n_rows + r] = dot;
      p.bound[t * n_rows + r] = rounding_bound(n_terms, mag);
    }
  }
  return p;
}

std::vector<float> run(GemmFn f, const Problem& p, size_t row_bytes) {
  std::vector<float> y(static_cast<size_t>(p.n_tokens * p.n_rows), NAN);
  f(p.w.data(), row_bytes, 0, p.n_rows, p.n_cols, p.x.data(), p.n_tokens, y.data(), p.n_rows);
  return y;
}

class LegacyKernels : public ::testing::TestWithParam<LegacyType> {};

}  // namespace

// The reference kernel against the dequantized weight dotted in float64 with
// the dequantized activations, on a row length with an odd number of blocks.
TEST_P(LegacyKernels, ReferenceMatchesFloat64) {
  const LegacyType& k = GetParam();
  const int64_t n_cols = k.q8k ? 256 * 5 : 32 * 37;
  const Problem p = make_problem(k, 6, n_cols, 3, 1);
  const std::vector<float> y = run(k.ref, p, n_cols / k.block_values * k.block_bytes);
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_GT(p.bound[i], 0.0);
    ASSERT_NEAR(y[i], p.exact[i], p.bound[i]) << k.name << " output " << i;
  }
}

namespace {

// One SIMD kernel against the reference kernel (both within the bound of the
// exact value, so within twice it of each other), and against itself: the
// same bits for 1..9 tokens at any token position and for row ranges split
// anywhere. Row lengths: blocks of 32: 1, 3, 5 and 37 blocks (AVX-512's
// quads of 4 blocks and their padded tails); IQ4_XS: 1 and 5 super-blocks.
void check_simd(const LegacyType& k, GemmFn f, const char* isa) {
  const std::vector<int64_t> lengths =
      k.q8k ? std::vector<int64_t>{256, 1280} : std::vector<int64_t>{32, 96, 160, 1184};
  const int64_t n_rows = 7, n_tokens = 9, ldy = n_rows + 3;
  for (int64_t n_cols : lengths) {
    const Problem p = make_problem(k, n_rows, n_cols, n_tokens, static_cast<uint32_t>(n_cols));
    const size_t row_bytes = n_cols / k.block_values * k.block_bytes;
    const std::vector<float> want = run(k.ref, p, row_bytes), got = run(f, p, row_bytes);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2 * p.bound[i]) << k.name << " " << isa << " n_cols " << n_cols << " output " << i;
    // Token chunks [t0, t0 + nt), row ranges [0, split) and [split, n_rows), into a wider y.
    for (int64_t nt = 1; nt <= n_tokens; ++nt)
      for (int64_t t0 : {int64_t{0}, n_tokens - nt})
        for (int64_t split : {int64_t{0}, int64_t{3}}) {
          std::vector<float> y(static_cast<size_t>(nt * ldy), NAN);
          const void* x = p.x.token(t0, n_cols);
          if (split > 0) f(p.w.data(), row_bytes, 0, split, n_cols, x, nt, y.data(), ldy);
          f(p.w.data(), row_bytes, split, n_rows, n_cols, x, nt, y.data(), ldy);
          for (int64_t t = 0; t < nt; ++t)
            for (int64_t r = 0; r < n_rows; ++r) {
              const float a = y[t * ldy + r], b = got[(t0 + t) * n_rows + r];
              ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << k.name << " " << isa << " n_cols " << n_cols << " tokens " << t0
                                                   << "+" << nt << " split " << split << " row " << r;
            }
        }
  }
}

}  // namespace

TEST_P(LegacyKernels, Avx2MatchesReferenceAndIsDeterministic) {
  if (!cpu_features().avx2) GTEST_SKIP() << "CPU lacks AVX2 (" << cpu_features().describe() << ")";
  check_simd(GetParam(), GetParam().avx2, "avx2");
}

TEST_P(LegacyKernels, Avx512MatchesReferenceAndIsDeterministic) {
  if (!cpu_features().avx512 || !cpu_features().avx512_vnni)
    GTEST_SKIP() << "CPU lacks AVX-512 VNNI (" << cpu_features().describe() << ")";
  check_simd(GetParam(), GetParam().avx512, "avx512");
}

INSTANTIATE_TEST_SUITE_P(Types, LegacyKernels, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<LegacyType>& i) { return i.param.name; });
