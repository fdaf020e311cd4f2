// Prefill (16+ token) quantized kernel tables against a float64 reference,
// and their contract: a (row, token) result does not depend on how many
// tokens are in the batch nor on the row range a thread was given.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/weight_kernels.h"
#include "kernels/quant_blocks.h"

using namespace nexus;

namespace {

// Random Q8_0 / Q4_0 rows with varied block scales (ggml's quantizers'
// value ranges), and their dequantized values in float64.
struct QuantWeight {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
  size_t row_bytes = 0;
};

QuantWeight make_weight(GgmlType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> q8(-127, 127), q4(0, 15);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  QuantWeight w;
  w.row_bytes = ggml_row_size(type, static_cast<uint64_t>(n_cols));
  w.bytes.assign(w.row_bytes * static_cast<size_t>(n_rows), 0);
  w.values.resize(static_cast<size_t>(n_rows * n_cols));
  std::vector<float> deq(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = w.bytes.data() + static_cast<size_t>(r) * w.row_bytes;
    for (int64_t b = 0; b < n_cols / 32; ++b) {
      if (type == GgmlType::Q8_0) {
        auto* blk = reinterpret_cast<BlockQ8_0*>(row) + b;
        blk->d = fp32_to_fp16(scale(rng));
        for (int8_t& q : blk->qs) q = static_cast<int8_t>(q8(rng));
      } else {
        auto* blk = reinterpret_cast<BlockQ4_0*>(row) + b;
        blk->d = fp32_to_fp16(scale(rng));
        for (uint8_t& q : blk->qs) q = static_cast<uint8_t>(q4(rng) | (q4(rng) << 4));
      }
    }
    dequantize_row(type, row, deq.data(), n_cols);
    for (int64_t c = 0; c < n_cols; ++c) w.values[static_cast<size_t>(r * n_cols + c)] = deq[static_cast<size_t>(c)];
  }
  return w;
}

// The prefill kernels of `type` this CPU runs (the table's Avx512Prefill and
// Amx entries).
struct Kern {
  std::string name;
  GemmFn fn;
};

std::vector<Kern> prefill_kernels(GgmlType type) {
  std::vector<Kern> out;
  const TypeKernels& k = *type_kernels(type);
  for (Isa isa : {Isa::Avx512Prefill, Isa::Amx})
    if (cpu_supports(isa) && k.gemm[static_cast<size_t>(isa)])
      out.push_back({std::string(isa_name(isa)), k.gemm[static_cast<size_t>(isa)]});
  return out;
}

GemmFn reference(GgmlType type) { return type_kernels(type)->gemm[static_cast<size_t>(Isa::Ref)]; }

// A random weight and n_tokens random activations (normal), float and
// quantized ([n_tokens, n_cols / 32] blocks).
struct Problem {
  QuantWeight w;
  std::vector<float> x;
  std::vector<BlockQ8Act> xq;
};

Problem make_problem(GgmlType type, int64_t n_rows, int64_t n_cols, int64_t n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Problem p{make_weight(type, n_rows, n_cols, rng), std::vector<float>(static_cast<size_t>(n_tokens * n_cols)), {}};
  for (float& v : p.x) v = nd(rng);
  const int64_t n_blocks = n_cols / 32;
  p.xq.resize(static_cast<size_t>(n_tokens * n_blocks));
  for (int64_t t = 0; t < n_tokens; ++t) quantize_act_q8(&p.x[t * n_cols], &p.xq[t * n_blocks], n_cols);
  return p;
}

}  // namespace

class PrefillTest : public ::testing::TestWithParam<GgmlType> {};

// Against float64 dot products of the dequantized weights with the float
// activations: the only errors are the activations' 8-bit rounding (bounded
// per block by sum|w| * (d_x / 2 + 127 d_x 2^-11 for d_x's fp16 rounding)) and
// float32 accumulation of the block products (1e-5 relative to sum |w x|).
TEST_P(PrefillTest, MatchesFloat64Reference) {
  const auto tables = prefill_kernels(GetParam());
  if (tables.empty()) GTEST_SKIP() << "no prefill kernels for this CPU (" << cpu_features().describe() << ")";
  const GgmlType type = GetParam();
  const int64_t n_rows = 53, n_cols = 2048, n_tokens = 29, n_blocks = n_cols / 32;
  const Problem p = make_problem(type, n_rows, n_cols, n_tokens, 11);
  const QuantWeight& w = p.w;
  const std::vector<float>& x = p.x;
  const std::vector<BlockQ8Act>& xq = p.xq;
  for (const Kern& k : tables) {
    std::vector<float> y(static_cast<size_t>(n_tokens * n_rows), NAN);
    k.fn(w.bytes.data(), w.row_bytes, 0, n_rows, n_cols, xq.data(), n_tokens, y.data(), n_rows);
    double worst = 0;
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < n_rows; ++r) {
        double ref = 0, mag = 0, quant_err = 0;
        for (int64_t b = 0; b < n_blocks; ++b) {
          double amax = 0, wabs = 0;
          for (int64_t c = b * 32; c < b * 32 + 32; ++c) {
            const double wv = w.values[static_cast<size_t>(r * n_cols + c)], xv = x[static_cast<size_t>(t * n_cols + c)];
            ref += wv * xv;
            mag += std::abs(wv * xv);
            amax = std::max(amax, std::abs(xv));
            wabs += std::abs(wv);
          }
          const double d = amax / 127;
          quant_err += wabs * (d / 2 + 127 * d * std::ldexp(1.0, -11));
        }
        const double got = y[static_cast<size_t>(t * n_rows + r)];
        ASSERT_NEAR(got, ref, 1e-5 * mag + quant_err) << k.name << " row " << r << " token " << t;
        worst = std::max(worst, std::abs(got - ref) / mag);
      }
    // The stated bound in practice: the 8-bit activations' rounding
    // dominates; relative to sum |w x| it is 6.6e-4 here (avx512_prefill,
    // both types), asserted below 2e-3.
    EXPECT_LT(worst, 2e-3) << k.name;
    RecordProperty(std::string(k.name) + "_worst_rel_err", std::to_string(worst));
  }
}

// The contract of weight_kernels.h: every (row, token) result is the same bits
// whether the token came in a batch of 8, 9, 16, 17, 29 or 40 tokens (at any
// position), and whatever row range the thread split gave (ragged ranges
// that cut 16-row panels).
TEST_P(PrefillTest, IndependentOfBatchAndRowSplit) {
  const auto tables = prefill_kernels(GetParam());
  if (tables.empty()) GTEST_SKIP() << "no prefill kernels for this CPU (" << cpu_features().describe() << ")";
  const GgmlType type = GetParam();
  const int64_t n_rows = 77, n_cols = 512, n_tokens = 40, n_blocks = n_cols / 32;
  const Problem p = make_problem(type, n_rows, n_cols, n_tokens, 5);
  const QuantWeight& w = p.w;
  const std::vector<BlockQ8Act>& xq = p.xq;
  for (const Kern& k : tables) {
    const GemmFn fn = k.fn;
    std::vector<float> full(static_cast<size_t>(n_tokens * n_rows));
    fn(w.bytes.data(), w.row_bytes, 0, n_rows, n_cols, xq.data(), n_tokens, full.data(), n_rows);
    // Sub-batches [t0, t0 + n) of the same tokens.
    // From 8 tokens: matmul() hands 8-token batches (8 decoding sequences) to the AVX-512 prefill table.
    for (auto [t0, n] : {std::pair<int64_t, int64_t>{0, 16}, {3, 17}, {11, 29}, {24, 16}, {5, 8}, {30, 9}}) {
      std::vector<float> part(static_cast<size_t>(n * n_rows));
      fn(w.bytes.data(), w.row_bytes, 0, n_rows, n_cols, &xq[static_cast<size_t>(t0 * n_blocks)], n, part.data(),
         n_rows);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < n_rows; ++r)
          ASSERT_EQ(part[static_cast<size_t>(t * n_rows + r)], full[static_cast<size_t>((t0 + t) * n_rows + r)])
              << k.name << " batch [" << t0 << ", +" << n << ") row " << r << " token " << t;
    }
    // Ragged row ranges, as parallel_for may hand out.
    std::vector<float> split(static_cast<size_t>(n_tokens * n_rows), NAN);
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 5}, {5, 38}, {38, 39}, {39, 77}})
      fn(w.bytes.data(), w.row_bytes, r0, r1, n_cols, xq.data(), n_tokens, split.data(), n_rows);
    for (size_t i = 0; i < split.size(); ++i) ASSERT_EQ(split[i], full[i]) << k.name << " output " << i;
  }
}

// Against the portable reference table on the same quantized activations:
// the same exact int32 block sums and float scales, so only the float
// summation order differs (well inside 1e-4 relative over 2048 values).
TEST_P(PrefillTest, MatchesReferenceKernels) {
  const auto tables = prefill_kernels(GetParam());
  if (tables.empty()) GTEST_SKIP() << "no prefill kernels for this CPU (" << cpu_features().describe() << ")";
  const GgmlType type = GetParam();
  const int64_t n_rows = 40, n_cols = 2048, n_tokens = 130;
  const Problem p = make_problem(type, n_rows, n_cols, n_tokens, 3);
  const QuantWeight& w = p.w;
  const std::vector<BlockQ8Act>& xq = p.xq;
  std::vector<float> want(static_cast<size_t>(n_tokens * n_rows));
  reference(type)(w.bytes.data(), w.row_bytes, 0, n_rows, n_cols, xq.data(), n_tokens, want.data(),
                                 n_rows);
  for (const Kern& k : tables) {
    std::vector<float> got(want.size(), NAN);
    k.fn(w.bytes.data(), w.row_bytes, 0, n_rows, n_cols, xq.data(), n_tokens, got.data(), n_rows);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << k.name << " output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PrefillTest, ::testing::Values(GgmlType::Q8_0, GgmlType::Q4_0),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });
