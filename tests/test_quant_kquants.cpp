// K-quants (Q2_K .. Q6_K) and Q8_K activations: dequantization of hand-built
// blocks against values worked out by hand, quantize_act_q8k against
// hand-computed codes, and the product kernels against a float64 reference.
//
// The SIMD kernels must give the reference's bits (gemm_kquants.h says why),
// so their tests compare bits: the float64 bound then holds for them too.
//
// The random product tests use dequantize_row for the reference's weights, so
// a layout bug shared by the dequantizer and the kernels (kquant_unpack.h)
// would cancel there; the hand-built blocks are what pins the layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/gemm_ref.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/gemm_kquants.h"

namespace nexus {
namespace {

uint16_t h(float f) { return fp32_to_fp16(f); }

template <class Block>
std::vector<float> dequant(const Block& b, void (*fn)(const void*, float*, int64_t)) {
  std::vector<float> out(kQK_K);
  fn(&b, out.data(), kQK_K);
  return out;
}

// The expected values of a block: `fill` for sub-block s (16 values at 16 s),
// then single values.
void fill(std::vector<float>& e, int s, float v) {
  for (int l = 0; l < 16; ++l) e[16 * s + l] = v;
}
void expect_values(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "value " << i;
}

// ---------------------------------------------------------------- dequantize

TEST(DequantKQuants, Q2_KScaleAndMinNibbles) {
  BlockQ2_K b{};
  b.d = h(0.5f), b.dmin = h(0.25f);
  b.scales[0] = 0x23;  // scale 3, min 2
  b.scales[1] = 0x1f;  // scale 15, min 1
  b.scales[2] = 0x04;  // scale 4, min 0
  b.scales[8] = 0xf0;  // scale 0, min 15
  b.qs[0] = 0xe4;      // 2-bit fields 0, 1, 2, 3: values 0, 32, 64, 96
  b.qs[16] = 0x03;     // value 16: 3
  b.qs[32] = 0xff;     // values 128, 160, 192, 224: 3
  std::vector<float> e(kQK_K, 0.0f);
  fill(e, 0, -0.5f);          // 0.5 * 3 * 0 - 0.25 * 2
  fill(e, 1, -0.25f);         // 0.5 * 15 * 0 - 0.25 * 1
  e[16] = 22.25f;             // 0.5 * 15 * 3 - 0.25
  e[32] = 2.0f;               // 0.5 * 4 * 1
  fill(e, 8, -3.75f);         // 0.5 * 0 * q - 0.25 * 15 (value 128 included)
  // value 64 (q 2) and 96 (q 3) are in sub-blocks 4 and 6, scale 0 and min 0.
  expect_values(dequant(b, dequantize_row_q2_k), e);
}

TEST(DequantKQuants, Q3_KPackedSignedScalesAndInvertedHighBit) {
  BlockQ3_K b{};
  b.d = h(0.25f);
  // Every scale stored as 32 (= 0) but four: low nibbles 0, top bits 2 (0xaa).
  b.scales[8] = b.scales[9] = b.scales[10] = b.scales[11] = 0xaa;
  b.scales[0] = 0x01;  // scale 0: low 1, top 2 (byte 8 bits 0-1): 33 -> +1
  b.scales[9] = 0xb2;  // scale 5: top 0 (bits 2-3); scale 9: top 3 (bits 4-5)
                       // scale 5: low 0 (byte 5) -> 0 - 32 = -32
  b.scales[1] = 0xf0;  // scale 9: low 15 (byte 1 high nibble) -> 63 -> +31
  b.scales[7] = 0x80;  // scale 15: low 8 (byte 7 high nibble), top 2 (byte 11 bits 6-7) -> 40 -> +8
  // hmask clear means q - 4.
  b.qs[0] = 0x03, b.hmask[0] = 0x01;  // value 0: 3, high set -> 3
  b.hmask[2] = 0x01;                  // value 2: 0, high set -> 0
  b.qs[16] = 0x20;                    // value 80 (bits 4-5 of qs[16]): 2, high clear -> -2
  b.qs[63] = 0x01, b.hmask[31] = 0x10;  // value 159 (qs[32 + 31] bits 0-1, hmask bit 4): 1
  b.qs[48] = 0xc0, b.hmask[16] = 0x80;  // value 240 (qs[32 + 16] bits 6-7, hmask bit 7): 3
  std::vector<float> e(kQK_K, 0.0f);
  fill(e, 0, -1.0f);  // 0.25 * 1 * -4
  e[0] = 0.75f;       // 0.25 * 1 * 3
  e[2] = 0.0f;
  fill(e, 5, 32.0f);  // 0.25 * -32 * -4
  e[80] = 16.0f;      // 0.25 * -32 * -2
  fill(e, 9, -31.0f);  // 0.25 * 31 * -4
  e[159] = 7.75f;      // 0.25 * 31 * 1
  fill(e, 15, -8.0f);  // 0.25 * 8 * -4
  e[240] = 6.0f;       // 0.25 * 8 * 3
  expect_values(dequant(b, dequantize_row_q3_k), e);
}

TEST(DequantKQuants, Q4_KSixBitScalesOfBothHalves) {
  BlockQ4_K b{};
  b.d = h(0.5f), b.dmin = h(0.125f);
  // Sub-block 1: scale 45, min 3 in bits 0-5 of bytes 1 and 5. Sub-block 5:
  // scale 58 = 0b11'1010 (low 0xa in byte 9, top 3 in byte 1 bits 6-7), min
  // 37 = 0b10'0101 (low 5 in byte 9's high nibble, top 2 in byte 5 bits 6-7).
  b.scales[1] = 45 | 3 << 6;
  b.scales[5] = 3 | 2 << 6;
  b.scales[9] = 0x5a;
  // Sub-block 7: scale 15 (byte 11 low nibble), min 16 (top 1 in byte 7 bits 6-7).
  b.scales[11] = 0x0f;
  b.scales[7] = 1 << 6;
  b.qs[0] = 0x7c;       // value 0 (sub-block 0, all zero): 12; value 32: 7
  b.qs[64 + 5] = 0xf0;  // value 165 = high nibble of qs[69] (sub-block 5): 15
  b.qs[127] = 0x90;     // value 255: 9
  std::vector<float> e(kQK_K, 0.0f);
  for (int l = 32; l < 64; ++l) e[l] = -0.375f;     // 0.125 * 3
  e[32] = 157.125f;                                 // 0.5 * 45 * 7 - 0.375
  for (int l = 160; l < 192; ++l) e[l] = -4.625f;   // 0.125 * 37
  e[165] = 430.375f;                                // 0.5 * 58 * 15 - 4.625
  for (int l = 224; l < 256; ++l) e[l] = -2.0f;     // 0.125 * 16
  e[255] = 65.5f;                                   // 0.5 * 15 * 9 - 2
  expect_values(dequant(b, dequantize_row_q4_k), e);
}

TEST(DequantKQuants, Q5_KFifthBitAndPackedScales) {
  BlockQ5_K b{};
  b.d = h(1.0f), b.dmin = h(0.5f);
  b.scales[0] = 1, b.scales[4] = 2;  // sub-block 0: scale 1, min 2
  b.scales[3] = 2;                   // sub-block 3: scale 2, min 0
  // Sub-block 6: scale 35 = 0b10'0011 (low 3 in byte 10, top 2 in byte 2 bits
  // 6-7), min 20 = 0b01'0100 (low 4 in byte 10's high nibble, top 1 in byte 6).
  b.scales[10] = 0x43;
  b.scales[2] = 2 << 6;
  b.scales[6] = 1 << 6;
  b.qs[0] = 0x05, b.qh[0] = 0x01 | 0x40;  // value 0: 5 + 16; value 192 (qh bit 6): 0 + 16
  b.qs[1] = 0x05;                         // value 1: 5
  b.qh[2] = 0x01;                         // value 2: 0 + 16
  b.qs[36] = 0xf0, b.qh[4] = 0x08;        // value 100 (qs[32 + 4] high, qh bit 3): 15 + 16
  b.qs[127] = 0x01, b.qh[31] = 0x40;      // value 223 (qs[96 + 31] low, qh bit 6): 1 + 16
  std::vector<float> e(kQK_K, 0.0f);
  for (int l = 0; l < 32; ++l) e[l] = -1.0f;  // 1 * 0 - 0.5 * 2
  e[0] = 20.0f, e[1] = 4.0f, e[2] = 15.0f;
  e[100] = 62.0f;                                 // 2 * 31
  for (int l = 192; l < 224; ++l) e[l] = -10.0f;  // 0.5 * 20
  e[192] = 550.0f;                                // 35 * 16 - 10
  e[223] = 585.0f;                                // 35 * 17 - 10
  expect_values(dequant(b, dequantize_row_q5_k), e);
}

TEST(DequantKQuants, Q6_KSignedScalesAndSplitBits) {
  BlockQ6_K b{};
  b.d = h(0.25f);
  b.scales[0] = -3, b.scales[7] = 5, b.scales[10] = -128, b.scales[15] = 127;
  b.ql[0] = 0x0f, b.qh[0] = 0x03;    // value 0: 15 | 3 << 4 = 63 -> 31
  b.ql[63] = 0x20, b.qh[31] = 0x80;  // value 127 (ql[32 + 31] high, qh[31] bits 6-7): 2 | 2 << 4 -> 2
  b.ql[96] = 0x01, b.qh[32] = 0x04;  // value 160 (ql[64 + 32] low, qh[32] bits 2-3): 1 | 1 << 4 -> -15
  b.ql[112] = 0xf0, b.qh[48] = 0xc0; // value 240 (ql[64 + 48] high, qh[48] bits 6-7): 63 -> 31
  std::vector<float> e(kQK_K, 0.0f);
  fill(e, 0, 24.0f);       // 0.25 * -3 * -32
  e[0] = -23.25f;          // 0.25 * -3 * 31
  fill(e, 7, -40.0f);      // 0.25 * 5 * -32
  e[127] = 2.5f;
  fill(e, 10, 1024.0f);    // 0.25 * -128 * -32
  e[160] = 480.0f;         // 0.25 * -128 * -15
  fill(e, 15, -1016.0f);   // 0.25 * 127 * -32
  e[240] = 984.25f;        // 0.25 * 127 * 31
  expect_values(dequant(b, dequantize_row_q6_k), e);
}

// ------------------------------------------------------------ Q8_K activations

TEST(QuantizeActQ8K, NegativeLargestValueRoundsHalfToEven) {
  std::vector<float> x(256, 0.0f);
  x[0] = -127.0f;  // largest magnitude, first: iscale = -127 / -127 = 1
  x[1] = 2.5f, x[2] = -2.5f, x[3] = 3.5f, x[4] = 126.7f;
  x[5] = 127.0f;   // same magnitude, later, other sign: +127 (the top code)
  x[20] = 10.0f, x[255] = -100.0f;
  BlockQ8K b;
  quantize_act_q8k(x.data(), &b, 256);
  EXPECT_EQ(b.d, 1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 2);   // half to even (roundf would give 3)
  EXPECT_EQ(b.qs[2], -2);
  EXPECT_EQ(b.qs[3], 4);
  EXPECT_EQ(b.qs[4], 127);
  EXPECT_EQ(b.qs[5], 127);
  EXPECT_EQ(b.qs[20], 10);
  EXPECT_EQ(b.qs[255], -100);
  EXPECT_EQ(b.bsums[0], -127 + 2 - 2 + 4 + 127 + 127);
  EXPECT_EQ(b.bsums[1], 10);
  for (int s = 2; s < 15; ++s) EXPECT_EQ(b.bsums[s], 0) << s;
  EXPECT_EQ(b.bsums[15], -100);
}

TEST(QuantizeActQ8K, PositiveLargestValueGivesNegativeScale) {
  std::vector<float> x(256, 0.0f);
  x[7] = 254.0f;                       // iscale = -127 / 254 = -0.5, d = -2
  x[8] = -254.0f;                      // +127
  x[9] = 5.0f, x[10] = 7.0f, x[11] = -1.0f;  // -2.5 -> -2, -3.5 -> -4, 0.5 -> 0
  BlockQ8K b;
  quantize_act_q8k(x.data(), &b, 256);
  EXPECT_EQ(b.d, -2.0f);
  EXPECT_EQ(b.qs[7], -127);
  EXPECT_EQ(b.qs[8], 127);
  EXPECT_EQ(b.qs[9], -2);
  EXPECT_EQ(b.qs[10], -4);
  EXPECT_EQ(b.qs[11], 0);
  EXPECT_EQ(b.bsums[0], -127 + 127 - 2 - 4);
}

TEST(QuantizeActQ8K, ScaleStaysFloat32AndCodesStayInRange) {
  // d = -max / 127 is kept in float32 (fp16 would round 3 / 127); no code
  // passes 127 though iscale and iscale * x are rounded.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> x(256);
  for (float& v : x) v = u(rng);
  x[100] = -3.0f, x[101] = 3.0f;
  BlockQ8K b;
  quantize_act_q8k(x.data(), &b, 256);
  EXPECT_EQ(b.d, 1.0f / (-127.0f / -3.0f));
  EXPECT_NE(b.d, fp16_to_fp32(fp32_to_fp16(b.d)));
  EXPECT_EQ(b.qs[100], -127);
  EXPECT_EQ(b.qs[101], 127);
  for (int j = 0; j < 256; ++j) EXPECT_NEAR(b.qs[j], x[j] * (127.0f / 3.0f), 0.5001f) << j;
}

TEST(QuantizeActQ8K, AllZeroBlockAndIndependentBlocks) {
  std::vector<float> x(512, 0.0f);
  x[256 + 3] = 0.5f;
  BlockQ8K b[2];
  std::memset(b, 0x55, sizeof b);
  quantize_act_q8k(x.data(), b, 512);
  EXPECT_EQ(b[0].d, 0.0f);
  for (int8_t q : b[0].qs) EXPECT_EQ(q, 0);
  for (int16_t s : b[0].bsums) EXPECT_EQ(s, 0);
  EXPECT_EQ(b[1].d, 1.0f / (-127.0f / 0.5f));
  EXPECT_EQ(b[1].qs[3], -127);
  EXPECT_EQ(b[1].bsums[0], -127);
}

// ------------------------------------------------------------ product kernels

struct KType {
  const char* name;
  size_t block_bytes;
  size_t d_offset;
  long dmin_offset;  // -1: no dmin
  DequantRowFn dequantize;
  GemmFn ref;
  GemmFn avx2;
};

const KType kTypes[] = {
    {"Q2_K", sizeof(BlockQ2_K), offsetof(BlockQ2_K, d), static_cast<long>(offsetof(BlockQ2_K, dmin)),
     dequantize_row_q2_k, gemm_ref_q2_k, gemm_q2_k_avx2},
    {"Q3_K", sizeof(BlockQ3_K), offsetof(BlockQ3_K, d), -1, dequantize_row_q3_k, gemm_ref_q3_k, gemm_q3_k_avx2},
    {"Q4_K", sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), static_cast<long>(offsetof(BlockQ4_K, dmin)),
     dequantize_row_q4_k, gemm_ref_q4_k, gemm_q4_k_avx2},
    {"Q5_K", sizeof(BlockQ5_K), offsetof(BlockQ5_K, d), static_cast<long>(offsetof(BlockQ5_K, dmin)),
     dequantize_row_q5_k, gemm_ref_q5_k, gemm_q5_k_avx2},
    {"Q6_K", sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), -1, dequantize_row_q6_k, gemm_ref_q6_k, gemm_q6_k_avx2},
};

void put_half(uint8_t* p, float f) {
  const uint16_t v = fp32_to_fp16(f);
  std::memcpy(p, &v, 2);
}

// A weight of random bytes with random non-zero scales, and quantized random
// activations.
struct Problem {
  const KType& k;
  int64_t n_rows, n_cols, n_tokens;
  size_t row_bytes;
  std::vector<uint8_t> w;
  std::vector<BlockQ8K> x;

  // extreme: weight bytes drawn from {00, ff, 80, 7f, 55, aa} and every
  // activation code +-127 (the largest products maddubs sees).
  Problem(const KType& type, int64_t rows, int64_t cols, int64_t tokens, uint32_t seed, bool extreme = false)
      : k(type), n_rows(rows), n_cols(cols), n_tokens(tokens), row_bytes(cols / kQK_K * type.block_bytes) {
    std::mt19937 rng(seed);
    w.resize(row_bytes * rows);
    constexpr uint8_t kEdges[] = {0x00, 0xff, 0x80, 0x7f, 0x55, 0xaa};
    for (uint8_t& b : w) b = extreme ? kEdges[rng() % 6] : static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> mag(1e-3f, 2e-2f);
    const auto scale = [&] { return (rng() & 1 ? 1.0f : -1.0f) * mag(rng); };
    for (size_t off = 0; off < w.size(); off += k.block_bytes) {
      put_half(&w[off + k.d_offset], scale());
      if (k.dmin_offset >= 0) put_half(&w[off + k.dmin_offset], scale());
    }
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> xf(static_cast<size_t>(cols * tokens));
    for (float& v : xf) v = extreme ? (rng() & 1 ? 1.0f : -1.0f) : nd(rng);
    x.resize(static_cast<size_t>(cols / kQK_K * tokens));
    quantize_act_q8k(xf.data(), x.data(), cols * tokens);
  }

  const uint8_t* row(int64_t r) const { return w.data() + r * row_bytes; }
  double act(int64_t t, int64_t c) const {
    const BlockQ8K& b = x[static_cast<size_t>(t * (n_cols / kQK_K) + c / kQK_K)];
    return static_cast<double>(b.d) * b.qs[c % kQK_K];
  }
  // Row r with its dmin (part = 1) or its d (part = 2) zeroed, dequantized:
  // the scale part and minus the min part of each value.
  std::vector<float> dequant_row(int64_t r, int part = 0) const {
    std::vector<uint8_t> copy(row(r), row(r) + row_bytes);
    for (size_t off = 0; off < copy.size(); off += k.block_bytes) {
      if (part == 1 && k.dmin_offset >= 0) put_half(&copy[off + k.dmin_offset], 0.0f);
      if (part == 2) put_half(&copy[off + k.d_offset], 0.0f);
    }
    std::vector<float> out(static_cast<size_t>(n_cols));
    k.dequantize(copy.data(), out.data(), n_cols);
    return out;
  }
};

// For (row r, token t): the float64 dot of the dequantized row with the
// dequantized activations, and S = sum over values of (|scale part| + |min
// part|) x |activation|, the scale of every rounding error.
struct Exact {
  double dot = 0.0, s = 0.0;
};
Exact exact(const Problem& p, int64_t r, int64_t t) {
  const std::vector<float> w = p.dequant_row(r), a = p.dequant_row(r, 1);
  const std::vector<float> b = p.k.dmin_offset >= 0 ? p.dequant_row(r, 2) : std::vector<float>(w.size(), 0.0f);
  Exact e;
  for (int64_t c = 0; c < p.n_cols; ++c) {
    const double xc = p.act(t, c);
    e.dot += static_cast<double>(w[c]) * xc;
    e.s += (std::fabs(static_cast<double>(a[c])) + std::fabs(static_cast<double>(b[c]))) * std::fabs(xc);
  }
  return e;
}

// The reference kernel's error bound against exact(), in units of S.
// Per super-block b the kernel adds fl(d x.d) fl(isum) = A_b (1 + theta_2)
// and, with mins, -fl(dmin x.d) fl(msum) = -B_b (1 + theta_2) to its
// accumulator by fused multiply-adds (A_b, B_b the exact scale and min
// terms, isum and msum exact integers), one rounding each: at most 2 nb
// roundings after any term, so the sum is within gamma_{2 nb + 2} of
// sum_b |A_b| + |B_b| <= S. The float64 side: dequantize_row rounds each
// value within gamma_3 of its parts (d * scale, times q, minus dmin * min),
// the float64 sums are ~2^-40 S. So |ref - dot| <= (2 nb + 5) u S to first
// order, u = 2^-24; 2 nb + 6 covers the higher-order terms.
double ref_bound(const Problem& p, double s) {
  return static_cast<double>(2 * (p.n_cols / kQK_K) + 6) * std::ldexp(1.0, -24) * s;
}

class KQuantGemm : public testing::TestWithParam<KType> {};

TEST_P(KQuantGemm, RefMatchesFloat64Reference) {
  for (int64_t n_cols : {256, 1024, 4096}) {
    const Problem p(GetParam(), 5, n_cols, 3, static_cast<uint32_t>(n_cols));
    std::vector<float> y(static_cast<size_t>(p.n_rows * p.n_tokens));
    GetParam().ref(p.w.data(), p.row_bytes, 0, p.n_rows, n_cols, p.x.data(), p.n_tokens, y.data(), p.n_rows);
    for (int64_t r = 0; r < p.n_rows; ++r)
      for (int64_t t = 0; t < p.n_tokens; ++t) {
        const Exact e = exact(p, r, t);
        EXPECT_NEAR(y[t * p.n_rows + r], e.dot, ref_bound(p, e.s)) << "n_cols " << n_cols << " row " << r << " token " << t;
        EXPECT_GT(std::fabs(e.dot), 0.0);
      }
  }
}

TEST_P(KQuantGemm, RefWritesOnlyItsRowsAndTokens) {
  const Problem p(GetParam(), 6, 512, 2, 11);
  const int64_t ldy = 9;
  std::vector<float> y(static_cast<size_t>(ldy * p.n_tokens), -7.0f), all(y);
  GetParam().ref(p.w.data(), p.row_bytes, 2, 5, p.n_cols, p.x.data(), p.n_tokens, y.data(), ldy);
  GetParam().ref(p.w.data(), p.row_bytes, 0, 6, p.n_cols, p.x.data(), p.n_tokens, all.data(), ldy);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    for (int64_t r = 0; r < ldy; ++r) {
      if (r >= 2 && r < 5)
        EXPECT_EQ(y[t * ldy + r], all[t * ldy + r]);
      else
        EXPECT_EQ(y[t * ldy + r], -7.0f) << r;
    }
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void run(GemmFn fn, const Problem& p, int64_t r0, int64_t r1, int64_t n_tokens, std::vector<float>& y, int64_t ldy) {
  fn(p.w.data(), p.row_bytes, r0, r1, p.n_cols, p.x.data(), n_tokens, y.data(), ldy);
}

#define SKIP_WITHOUT_AVX2() \
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU"

// Bound 0: both sum the same integers exactly and round the same float32
// operations (d * x.d, dmin * x.d, two fused multiply-adds) in one order.
TEST_P(KQuantGemm, Avx2GivesTheReferenceBits) {
  SKIP_WITHOUT_AVX2();
  for (bool extreme : {false, true})
    for (int64_t n_cols : {256, 1024, 4096}) {
      const Problem p(GetParam(), 7, n_cols, 9, static_cast<uint32_t>(n_cols) + 1, extreme);
      std::vector<float> ref(static_cast<size_t>(7 * 9)), simd(ref.size());
      run(GetParam().ref, p, 0, 7, 9, ref, 7);
      run(GetParam().avx2, p, 0, 7, 9, simd, 7);
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_EQ(bits(simd[i]), bits(ref[i])) << "n_cols " << n_cols << " extreme " << extreme << " row "
                                               << i % 7 << " token " << i / 7 << ": " << simd[i] << " vs " << ref[i];
    }
}

TEST_P(KQuantGemm, Avx2SameBitsForEveryTokenCountAndRowRange) {
  SKIP_WITHOUT_AVX2();
  const Problem p(GetParam(), 7, 1024, 9, 5);
  const int64_t ldy = 11;
  std::vector<float> full(static_cast<size_t>(ldy * 9));
  run(GetParam().avx2, p, 0, 7, 9, full, ldy);
  for (int64_t nt = 1; nt <= 9; ++nt) {
    std::vector<float> y(full.size(), -7.0f);
    run(GetParam().avx2, p, 0, 3, nt, y, ldy);
    run(GetParam().avx2, p, 3, 6, nt, y, ldy);
    run(GetParam().avx2, p, 6, 7, nt, y, ldy);
    for (int64_t t = 0; t < 9; ++t)
      for (int64_t r = 0; r < ldy; ++r) {
        const size_t i = static_cast<size_t>(t * ldy + r);
        if (t < nt && r < 7)
          EXPECT_EQ(bits(y[i]), bits(full[i])) << "n_tokens " << nt << " row " << r << " token " << t;
        else
          EXPECT_EQ(y[i], -7.0f) << "n_tokens " << nt << " wrote row " << r << " token " << t;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantGemm, testing::ValuesIn(kTypes),
                         [](const testing::TestParamInfo<KType>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace nexus
