// quantize_row_ref: the codes of ggml's reference quantizers on hand-worked
// blocks, and round trips through the kernels' dequantize_row.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"
#include "model/quantize_ref.h"
#include "util/error.h"

namespace nexus {
namespace {

TEST(QuantizeRef, Q8_0ScalesByAbsMaxOver127AndRoundsHalfAway) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f, x[1] = -127.0f, x[2] = 63.5f, x[3] = -63.5f, x[4] = 0.49f, x[5] = 1.5f;
  BlockQ8_0 b;
  quantize_row_ref(GgmlType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);  // 127 / 127
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], -127);
  EXPECT_EQ(b.qs[2], 64);   // roundf: half away from zero
  EXPECT_EQ(b.qs[3], -64);
  EXPECT_EQ(b.qs[4], 0);
  EXPECT_EQ(b.qs[5], 2);
  EXPECT_EQ(b.qs[31], 0);

  std::vector<float> zeros(32, 0.0f);
  quantize_row_ref(GgmlType::Q8_0, zeros.data(), &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int8_t q : b.qs) EXPECT_EQ(q, 0);
}

TEST(QuantizeRef, Q4_0UsesTheSignedMaxAndPacksHalvesInNibbles) {
  // Largest magnitude is negative (-8, first of the ties): d = -8 / -8 = 1, code = x + 8.
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j - 8);       // -8..7  -> codes 0..15
    x[j + 16] = static_cast<float>(7 - j);  // 7..-8  -> codes 15..0
  }
  BlockQ4_0 b;
  quantize_row_ref(GgmlType::Q4_0, x.data(), &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | ((15 - j) << 4)) << j;

  // Largest magnitude positive: d = 8 / -8 = -1, so +8 -> code 0 exactly and
  // -8 -> 16, clamped to 15 (the asymmetric end loses one level).
  std::vector<float> y(32, 0.0f);
  y[0] = 8.0f, y[1] = -8.0f, y[2] = 4.0f, y[3] = -4.0f;
  quantize_row_ref(GgmlType::Q4_0, y.data(), &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), -1.0f);
  EXPECT_EQ(b.qs[0] & 0xf, 0);
  EXPECT_EQ(b.qs[1] & 0xf, 15);
  EXPECT_EQ(b.qs[2] & 0xf, 4);
  EXPECT_EQ(b.qs[3] & 0xf, 12);
  EXPECT_EQ(b.qs[4], 0x88);  // zeros -> code 8 in both nibbles

  std::vector<float> zeros(32, 0.0f);
  quantize_row_ref(GgmlType::Q4_0, zeros.data(), &b, 32);
  EXPECT_EQ(b.d, 0x8000);  // 0 / -8 = -0.0, as in ggml
  for (uint8_t q : b.qs) EXPECT_EQ(q, 0x88);
}

// Each type's worst-case error on random rows, against the block scale.
TEST(QuantizeRef, RoundTripsThroughDequantizeWithinTheStepSize) {
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const int64_t n = 256;
  std::vector<float> x(n), back(n);
  for (float& v : x) v = nd(rng);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    std::vector<uint8_t> row(ggml_row_size(t, n));
    quantize_row_ref(t, x.data(), row.data(), n);
    dequantize_row(t, row.data(), back.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      for (int j = 0; j < 32; ++j) {
        const float v = x[b * 32 + j], err = std::fabs(back[b * 32 + j] - v);
        float bound = 0;
        switch (t) {
          case GgmlType::F16: bound = std::fabs(v) * 0x1p-11f + 1e-7f; break;
          case GgmlType::BF16: bound = std::fabs(v) * 0x1p-8f; break;
          case GgmlType::Q8_0: bound = 0.51f * amax / 127 + amax * 0x1p-11f; break;  // half a step + fp16 scale
          case GgmlType::Q4_0: bound = 1.01f * amax / 8; break;  // one step at the clamped end
          default: break;
        }
        ASSERT_LE(err, bound) << ggml_type_name(t) << " value " << b * 32 + j;
      }
    }
  }
}

TEST(QuantizeRef, RefusesPartialBlocksAndUnsupportedTypes) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(256);
  EXPECT_THROW(quantize_row_ref(GgmlType::Q8_0, x.data(), out.data(), 48), Error);
  EXPECT_THROW(quantize_row_ref(GgmlType::Q4_K, x.data(), out.data(), 64), Error);  // super-blocks of 256
  EXPECT_THROW(quantize_row_ref(GgmlType::Q8_1, x.data(), out.data(), 32), Error);
  EXPECT_THROW(quantize_row_ref(GgmlType::IQ2_XXS, x.data(), out.data(), 256), Error);
  EXPECT_THROW(quantize_row_ref(static_cast<GgmlType>(99), x.data(), out.data(), 32), Error);
}

}  // namespace
}  // namespace nexus
