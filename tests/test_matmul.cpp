// matmul() and the kernel table (weight_kernels.h) against a float64
// reference: every weight type's row, every instruction set this CPU runs,
// the same bits for any batch and row range, matmul_shared_input, and the F32
// panels. CTest also runs this file once per instruction set forced through
// NEXUS_KERNELS (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/f32_panels.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_kernels.h"
#include "model/quantize_ref.h"
#include "util/error.h"

using namespace nexus;

namespace {

// A random weight of `type` with n_rows x n_cols values: random floats
// through the reference quantizer (so every field of every block is
// plausible and non-zero), and the exact float values of what was stored
// (what dequantization must give).
struct RandomWeight {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
  WeightView view;
};

RandomWeight make_weight(GgmlType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.5f);
  RandomWeight w;
  const size_t row_bytes = ggml_row_size(type, n_cols);
  w.bytes.resize(row_bytes * n_rows);
  w.values.resize(static_cast<size_t>(n_rows * n_cols));
  std::vector<float> src(static_cast<size_t>(n_cols)), deq(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& v : src) v = nd(rng);
    uint8_t* row = w.bytes.data() + r * row_bytes;
    quantize_row_ref(type, src.data(), row, n_cols);
    dequantize_row(type, row, deq.data(), n_cols);
    for (int64_t c = 0; c < n_cols; ++c) w.values[r * n_cols + c] = deq[c];
  }
  w.view = WeightView{type, w.bytes.data(), n_rows, n_cols, row_bytes};
  return w;
}

// Activations of n_tokens rows in the format `type`'s kernels take.
std::vector<uint8_t> quantize_acts(GgmlType type, const std::vector<float>& x, int64_t n_tokens, int64_t n_cols) {
  const ActFormat f = type_kernels(type)->act;
  const size_t rb = act_row_bytes(f, n_cols);
  std::vector<uint8_t> out(rb * n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    uint8_t* dst = out.data() + t * rb;
    switch (f) {
      case ActFormat::F32: std::memcpy(dst, &x[t * n_cols], rb); break;
      case ActFormat::Q8_32: quantize_act_q8(&x[t * n_cols], reinterpret_cast<BlockQ8Act*>(dst), n_cols); break;
      case ActFormat::Q8_K: quantize_act_q8k(&x[t * n_cols], reinterpret_cast<BlockQ8K*>(dst), n_cols); break;
    }
  }
  return out;
}

// The kernels of `type`'s row this CPU runs, by instruction set (the
// reference first); each is the row's own entry, not a fallback.
struct Kern {
  Isa isa;
  GemmFn fn;
};
std::vector<Kern> kernels_of(GgmlType type, bool with_prefill) {
  std::vector<Kern> out;
  const TypeKernels& k = *type_kernels(type);
  for (size_t i = 0; i < kIsaCount; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (!with_prefill && (isa == Isa::Avx512Prefill || isa == Isa::Amx)) continue;
    if (k.gemm[i] && cpu_supports(isa)) out.push_back({isa, k.gemm[i]});
  }
  return out;
}

// A row length of whole blocks: `blocks` blocks of the type's block size.
int64_t cols_of(GgmlType type, int64_t blocks) {
  return blocks * static_cast<int64_t>(ggml_type_traits(static_cast<uint32_t>(type))->block_size);
}

std::vector<GgmlType> table_types() {
  std::vector<GgmlType> t;
  for (const TypeKernels& k : all_type_kernels()) t.push_back(k.type);
  return t;
}

}  // namespace

class MatmulTest : public ::testing::TestWithParam<GgmlType> {};

// matmul (the kernels this CPU selects, or those NEXUS_KERNELS forces: CTest
// runs this suite once per instruction set) against a float64 reference.
// Float weights: float32 accumulation only. Quantized weights: also the
// rounding of the activations to 8 bits, bounded per activation block by
// sum|w| . (d_x / 2 + the fp16 rounding of d_x times 127 for the 32-value
// blocks, whose d is stored as fp16), which the test computes and adds.
TEST_P(MatmulTest, MatchesFloat64Reference) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const GgmlType type = GetParam();
  const ActFormat act = type_kernels(type)->act;
  const int64_t n_rows = 67, n_cols = std::max<int64_t>(256, cols_of(type, 2)), ab = act_block_size(act);
  RandomWeight w = make_weight(type, n_rows, n_cols, rng);
  ThreadPool pool(2);
  for (int64_t n_tokens : {1, 5, 19}) {
    std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
    for (float& v : x) v = u(rng);
    std::vector<float> y(static_cast<size_t>(n_tokens * n_rows), NAN);
    matmul(w.view, x.data(), y.data(), n_tokens, pool);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < n_rows; ++r) {
        double ref = 0, mag = 0, quant_err = 0;
        for (int64_t b = 0; b < n_cols / ab; ++b) {
          double amax = 0, wabs = 0;
          for (int64_t c = b * ab; c < b * ab + ab; ++c) {
            ref += w.values[r * n_cols + c] * x[t * n_cols + c];
            mag += std::abs(w.values[r * n_cols + c] * x[t * n_cols + c]);
            amax = std::max(amax, std::abs(static_cast<double>(x[t * n_cols + c])));
            wabs += std::abs(w.values[r * n_cols + c]);
          }
          const double d = amax / 127;
          if (act == ActFormat::Q8_32) quant_err += wabs * (d / 2 + 127 * d * std::ldexp(1.0, -11));
          if (act == ActFormat::Q8_K) quant_err += wabs * d / 2;
        }
        ASSERT_NEAR(y[t * n_rows + r], ref, 1e-5 * mag + quant_err + 1e-7)
            << "row " << r << " token " << t << " (" << isa_name(matmul_isa(type, n_tokens)) << ")";
        // Any batch size agrees bit for bit with one token (dot_row) while
        // the same instruction set runs it; the prefill kernels (from 8 or 16
        // tokens) sum in another order.
        if (matmul_isa(type, n_tokens) == matmul_isa(type, 1)) {
          EXPECT_EQ(y[t * n_rows + r], dot_row(w.view.type, w.view.row(r), &x[t * n_cols], n_cols));
        }
      }
  }
}

// Every kernel of the type's row this CPU runs against the row's reference:
// the same integer sums and scales, so only float summation order differs
// (over 1024+ products: well inside 1e-4 relative).
TEST_P(MatmulTest, SimdKernelsMatchReferenceKernels) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const GgmlType type = GetParam();
  // 35 rows: two full 16-row tiles and a tail; 37 tokens: two full 16-token
  // tiles, a partial one, and the vector kernels' 4-token tiles. Columns: F32
  // a ragged tail; blocks of 32 33 blocks (block pairs and an odd last block);
  // super-blocks 5.
  const int64_t block = cols_of(type, 1);
  const int64_t n_rows = 35, n_cols = type == GgmlType::F32 ? 1028 : block == 1 ? 1024 : block == 32 ? 1056 : 1280;
  RandomWeight w = make_weight(type, n_rows, n_cols, rng);
  const int64_t n_tokens = 37;
  std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
  for (float& v : x) v = u(rng);
  const std::vector<uint8_t> xq = quantize_acts(type, x, n_tokens, n_cols);
  auto run = [&](GemmFn fn) {
    std::vector<float> y(static_cast<size_t>(n_tokens * n_rows), NAN);
    fn(w.bytes.data(), w.view.row_bytes, 0, n_rows, n_cols, xq.data(), n_tokens, y.data(), n_rows);
    return y;
  };
  const std::vector<Kern> ks = kernels_of(type, true);
  const std::vector<float> want = run(ks[0].fn);
  if (ks.size() == 1) GTEST_SKIP() << "no SIMD kernel of " << type << " for this CPU (" << cpu_features().describe() << ")";
  for (size_t i = 1; i < ks.size(); ++i) {
    const std::vector<float> got = run(ks[i].fn);
    for (size_t j = 0; j < want.size(); ++j)
      ASSERT_NEAR(got[j], want[j], 1e-4f * (1 + std::abs(want[j]))) << isa_name(ks[i].isa) << " output " << j;
  }
}

// The batching engine's determinism rests on this: a (row, token) product has
// the same bits whatever else shares the call (1 to 9 tokens, any token
// position in the batch) and whatever row range a thread was given. (The
// prefill kernels, which matmul() runs from 8 or 16 tokens, have their own
// test in test_kernels_prefill.cpp.)
TEST_P(MatmulTest, SameBitsForAnyBatchAndRowRange) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const GgmlType type = GetParam();
  const int64_t block = cols_of(type, 1);
  const int64_t n_rows = 37, n_cols = block == 1 ? 70 : block == 32 ? 96 : 512;
  RandomWeight w = make_weight(type, n_rows, n_cols, rng);
  constexpr int64_t kTokens = 9;
  std::vector<float> x(static_cast<size_t>(kTokens * n_cols));
  for (float& v : x) v = u(rng);
  const std::vector<uint8_t> xq = quantize_acts(type, x, kTokens, n_cols);
  const size_t act_bytes = act_row_bytes(type_kernels(type)->act, n_cols);
  // Rows [r0, r1) of tokens [t0, t0 + n) into y ([n, n_rows]).
  auto run = [&](GemmFn fn, int64_t t0, int64_t n, int64_t r0, int64_t r1, std::vector<float>& y) {
    fn(w.bytes.data(), w.view.row_bytes, r0, r1, n_cols, xq.data() + t0 * act_bytes, n, y.data(), n_rows);
  };
  for (const Kern& k : kernels_of(type, false)) {
    std::vector<float> solo(static_cast<size_t>(kTokens * n_rows));
    for (int64_t t = 0; t < kTokens; ++t) {  // each token alone, all rows at once
      std::vector<float> y(static_cast<size_t>(n_rows));
      run(k.fn, t, 1, 0, n_rows, y);
      std::copy(y.begin(), y.end(), solo.begin() + t * n_rows);
    }
    for (int64_t n = 2; n <= kTokens; ++n)
      for (int64_t t0 = 0; t0 + n <= kTokens; t0 += 3)
        for (int64_t split : {int64_t{0}, int64_t{5}, int64_t{17}}) {  // two "threads" [0, split), [split, n_rows)
          std::vector<float> y(static_cast<size_t>(n * n_rows), NAN);
          if (split > 0) run(k.fn, t0, n, 0, split, y);
          run(k.fn, t0, n, split, n_rows, y);
          for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < n_rows; ++r)
              ASSERT_EQ(y[t * n_rows + r], solo[(t0 + t) * n_rows + r])
                  << isa_name(k.isa) << ": token " << t0 + t << " of a batch of " << n << " from " << t0 << ", row "
                  << r << ", split at " << split;
        }
  }
}

// The quantized weight types only.
class QuantMatmulTest : public ::testing::TestWithParam<GgmlType> {};

// Quantized kernels on the shapes their fast paths do not cover: odd block
// counts (a lone last block), a single block, row sub-ranges (the thread
// split) and more tokens than one activation chunk; each (row, token) must
// match the reference and have the same bits as when computed alone (one
// row, one token).
TEST_P(QuantMatmulTest, KernelsEdgeShapesAndSameBitsPerRowToken) {
  const GgmlType type = GetParam();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const std::vector<Kern> ks = kernels_of(type, false);
  for (int64_t n_blocks : {1, 2, 3, 7, 8}) {
    const int64_t n_rows = 9, n_cols = cols_of(type, n_blocks), n_tokens = 70;
    RandomWeight w = make_weight(type, n_rows, n_cols, rng);
    std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
    for (float& v : x) v = u(rng);
    const std::vector<uint8_t> xq = quantize_acts(type, x, n_tokens, n_cols);
    const size_t act_bytes = act_row_bytes(type_kernels(type)->act, n_cols);
    const uint8_t* data = w.bytes.data();
    std::vector<float> want(static_cast<size_t>(n_tokens * n_rows));
    ks[0].fn(data, w.view.row_bytes, 0, n_rows, n_cols, xq.data(), n_tokens, want.data(), n_rows);
    for (const Kern& k : ks) {
      // Rows in three uneven ranges, as threads would split them.
      std::vector<float> got(want.size(), NAN);
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 4}, {4, 5}, {5, 9}})
        k.fn(data, w.view.row_bytes, r0, r1, n_cols, xq.data(), n_tokens, got.data(), n_rows);
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < n_rows; ++r) {
          const float g = got[t * n_rows + r], ref = want[t * n_rows + r];
          ASSERT_NEAR(g, ref, 1e-4f * (1 + std::abs(ref)))
              << isa_name(k.isa) << " blocks " << n_blocks << " row " << r << " token " << t;
          std::vector<float> alone(static_cast<size_t>(n_rows), NAN);
          k.fn(data, w.view.row_bytes, r, r + 1, n_cols, xq.data() + t * act_bytes, 1, alone.data(), n_rows);
          ASSERT_EQ(g, alone[r]) << isa_name(k.isa) << " blocks " << n_blocks << " row " << r << " token " << t;
        }
    }
  }
}

// An instruction set a row has no kernel for resolves to the nearest one
// below it that the row has, never to another row's kernel.
TEST(KernelTable, EveryRowHasAReferenceAndFallsBackWithinItself) {
  for (const TypeKernels& k : all_type_kernels()) {
    ASSERT_NE(k.gemm[static_cast<size_t>(Isa::Ref)], nullptr) << k.type;
    ASSERT_NE(k.dequantize, nullptr) << k.type;
    for (size_t i = 0; i < kIsaCount; ++i) {
      const Isa isa = static_cast<Isa>(i);
      const Isa got = picked_isa(k, isa);
      EXPECT_LE(static_cast<size_t>(got), i) << k.type;
      EXPECT_NE(k.gemm[static_cast<size_t>(got)], nullptr) << k.type;
      for (size_t j = static_cast<size_t>(got) + 1; j <= i; ++j) EXPECT_EQ(k.gemm[j], nullptr) << k.type << " " << j;
      EXPECT_EQ(pick_gemm(k, isa), k.gemm[static_cast<size_t>(got)]);
    }
    EXPECT_EQ(type_kernels(k.type), &k);
  }
  EXPECT_EQ(type_kernels(GgmlType::IQ2_XXS), nullptr);
  EXPECT_EQ(type_kernels(GgmlType::Q8_K), nullptr);  // an activation format, not a weight type
  ThreadPool pool(1);
  const WeightView w{GgmlType::IQ2_XXS, nullptr, 1, 256, ggml_row_size(GgmlType::IQ2_XXS, 256)};
  float x[256] = {}, y = 0;
  try {
    matmul(w, x, &y, 1, pool);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
}

// matmul_shared_input (Q/K/V, gate/up) gives each product exactly matmul's
// bits, for decode and prefill token counts and 1 or 2 threads, with mixed
// row counts (not multiples of 16), mixed quantized types of one activation
// format, and mixes of formats (which fall back to one matmul each).
TEST(MatmulSharedInput, SameBitsAsMatmulPerProduct) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t n_cols = 256;
  RandomWeight a = make_weight(GgmlType::Q8_0, 100, n_cols, rng);
  RandomWeight b = make_weight(GgmlType::Q4_0, 37, n_cols, rng);
  RandomWeight c = make_weight(GgmlType::Q8_0, 64, n_cols, rng);
  RandomWeight f = make_weight(GgmlType::F32, 20, n_cols, rng);
  RandomWeight k4 = make_weight(GgmlType::Q4_K, 48, n_cols, rng);
  RandomWeight k6 = make_weight(GgmlType::Q6_K, 21, n_cols, rng);
  const std::vector<std::vector<const RandomWeight*>> sets = {
      {&a, &b, &c}, {&a, &b, &c, &f}, {&k4, &k6, &k4}, {&k4, &a, &f}};
  for (int32_t threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t n_tokens : {1, 3, 16, 29}) {
      std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
      for (float& v : x) v = u(rng);
      for (const auto& ws : sets) {
        std::vector<std::vector<float>> want(ws.size()), got(ws.size());
        std::vector<MatmulOut> outs;
        for (size_t i = 0; i < ws.size(); ++i) {
          want[i].resize(static_cast<size_t>(n_tokens * ws[i]->view.n_rows));
          got[i].assign(want[i].size(), NAN);
          matmul(ws[i]->view, x.data(), want[i].data(), n_tokens, pool);
          outs.push_back({&ws[i]->view, got[i].data()});
        }
        matmul_shared_input(outs, x.data(), n_tokens, pool);
        for (size_t i = 0; i < ws.size(); ++i)
          for (size_t j = 0; j < want[i].size(); ++j)
            ASSERT_EQ(got[i][j], want[i][j]) << "product " << i << " (" << ws[i]->view.type << "), " << n_tokens
                                             << " tokens, " << threads << " threads, element " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulTest, ::testing::ValuesIn(table_types()),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(Types, QuantMatmulTest,
                         ::testing::ValuesIn([] {
                           std::vector<GgmlType> q;
                           for (GgmlType t : table_types())
                             if (type_kernels(t)->act != ActFormat::F32) q.push_back(t);
                           return q;
                         }()),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

// F32 weights repacked into 16-row panels (what LlamaModel does at load on
// AVX2 and AVX-512 CPUs): a row count that leaves a partial last panel, 64
// columns like TinyLLama-v0's output layer, batches of every tile shape.
// Against a float64 reference, and each (row, token) with the same bits in
// any batch, from any panel range, and from every panel kernel this CPU runs.
TEST(F32Panels, MatchFloat64AndSameBitsForAnyBatchRangeAndKernel) {
  if (!f32_panels_supported()) GTEST_SKIP() << "no panel kernel on this CPU (" << cpu_features().describe() << ")";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t n_rows = 16 * 9 + 5, n_cols = 64, n_panels = (n_rows + kPanelRows - 1) / kPanelRows;
  RandomWeight w = make_weight(GgmlType::F32, n_rows, n_cols, rng);
  const std::shared_ptr<const float[]> panels = pack_f32_panels(w.view);
  ASSERT_NE(panels, nullptr);
  const int64_t kTokens = 11;
  std::vector<float> x(static_cast<size_t>(kTokens * n_cols));
  for (float& v : x) v = u(rng);
  using PanelFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, const float*, int64_t, float*, int64_t);
  std::vector<PanelFn> kernels{gemm_f32_panels_avx2};
  if (cpu_features().avx512_vnni) kernels.push_back(gemm_f32_panels_avx512);
  std::vector<float> solo(static_cast<size_t>(kTokens * n_rows));
  for (int64_t t = 0; t < kTokens; ++t) {
    gemm_f32_panels_avx2(panels.get(), 0, n_panels, n_rows, n_cols, &x[t * n_cols], 1, &solo[t * n_rows], n_rows);
    for (int64_t r = 0; r < n_rows; ++r) {
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < n_cols; ++c) {
        ref += static_cast<double>(w.values[r * n_cols + c]) * x[t * n_cols + c];
        mag += std::abs(static_cast<double>(w.values[r * n_cols + c]) * x[t * n_cols + c]);
      }
      ASSERT_NEAR(solo[t * n_rows + r], ref, 1e-6 * mag + 1e-7) << "row " << r << " token " << t;
    }
  }
  for (PanelFn fn : kernels)
    for (int64_t n = 1; n <= kTokens; ++n)
      for (int64_t split : {int64_t{0}, int64_t{3}, n_panels - 1}) {
        std::vector<float> y(static_cast<size_t>(n * n_rows), NAN);
        fn(panels.get(), 0, split, n_rows, n_cols, x.data(), n, y.data(), n_rows);
        fn(panels.get(), split, n_panels, n_rows, n_cols, x.data(), n, y.data(), n_rows);
        for (int64_t t = 0; t < n; ++t)
          for (int64_t r = 0; r < n_rows; ++r)
            ASSERT_EQ(y[t * n_rows + r], solo[t * n_rows + r])
                << "batch " << n << ", token " << t << ", row " << r << ", split at panel " << split;
      }
  // matmul() reads the panels when the view has them.
  WeightView view = w.view;
  view.panels = panels.get();
  ThreadPool pool(2);
  std::vector<float> y(static_cast<size_t>(kTokens * n_rows), NAN);
  matmul(view, x.data(), y.data(), kTokens, pool);
  EXPECT_EQ(y, solo);
}
