// attention_head (online softmax over chunks) against a float64 full softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <immintrin.h>

#include <limits>

#include "kernels/attention.h"
#include "kernels/fast_exp.h"
#include "kernels/quant_blocks.h"

using namespace nexus;

TEST(Attention, MatchesFloat64FullSoftmax) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);  // wide scores: the running max changes often
  for (int32_t head_dim : {4, 8, 64, 128}) {
    for (int32_t n_keys : {1, 15, 16, 17, 100}) {
      const int64_t stride = head_dim * 3;  // the head sits inside a wider KV row (GQA)
      std::vector<float> q(head_dim), k(n_keys * stride), v(n_keys * stride), out(head_dim);
      for (float& x : q) x = nd(rng);
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      const int64_t off = head_dim;  // the second KV head of the row
      attention_head(q.data(), k.data() + off, v.data() + off, stride, n_keys, head_dim, scale, out.data());

      std::vector<double> s(n_keys);
      double max = -1e300, sum = 0;
      for (int32_t p = 0; p < n_keys; ++p) {
        double d = 0;
        for (int32_t i = 0; i < head_dim; ++i) d += double(q[i]) * k[p * stride + off + i];
        s[p] = d * scale;
        max = std::max(max, s[p]);
      }
      for (double& x : s) sum += (x = std::exp(x - max));
      for (int32_t i = 0; i < head_dim; ++i) {
        double ref = 0, mag = 0;
        for (int32_t p = 0; p < n_keys; ++p) {
          ref += s[p] / sum * v[p * stride + off + i];
          mag += s[p] / sum * std::abs(v[p * stride + off + i]);
        }
        ASSERT_NEAR(out[i], ref, 1e-5 * (mag + 1)) << "head_dim " << head_dim << " n_keys " << n_keys << " i " << i;
      }
    }
  }
}

TEST(Attention, SingleKeyReturnsItsValue) {
  const float q[4] = {1, 2, 3, 4}, k[4] = {9, 9, 9, 9}, v[4] = {0.5f, -1, 2, 7};
  float out[4];
  attention_head(q, k, v, 4, 1, 4, 1.0f, out);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], v[i]);
}

TEST(FastExp, EightLanesMatchScalarAndStd) {
  alignas(32) float x[8], y[8];
  for (float base = -100.0f; base <= 0.0f; base += 0.37f) {
    for (int i = 0; i < 8; ++i) x[i] = std::min(0.0f, base + i * 0.05f);
    _mm256_store_ps(y, exp_nonpos8(_mm256_load_ps(x)));
    for (int i = 0; i < 8; ++i) {
      // Same arithmetic; only FMA contraction (on at -O2, off at -O0) may differ.
      EXPECT_NEAR(y[i], exp_nonpos(x[i]), 1e-6f * exp_nonpos(x[i])) << x[i];
      EXPECT_NEAR(y[i], std::exp(x[i]), 1e-6f * std::exp(x[i]) + (x[i] < -87.0f ? 1e-37f : 0.0f)) << x[i];
    }
  }
  x[0] = -std::numeric_limits<float>::infinity();
  x[1] = std::numeric_limits<float>::quiet_NaN();
  _mm256_store_ps(y, exp_nonpos8(_mm256_load_ps(x)));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(FastTanh, WithinTwoMillionthsOfStd) {
  // Dense near 0 (the Taylor branch and its seam at 0.25), then out to where
  // tanh is 1 in float.
  for (float x = -12.0f; x <= 12.0f; x += (std::abs(x) < 0.5f ? 1.0f / 4096 : 1.0f / 64)) {
    const double ref = std::tanh(static_cast<double>(x));
    EXPECT_NEAR(tanh_fast(x), ref, 2e-6 * std::abs(ref) + 1e-30) << x;
  }
  for (float x : {1e-20f, -1e-20f, 0.0f, 0.25f, -0.25f, 100.0f, -1e30f})
    EXPECT_NEAR(tanh_fast(x), std::tanh(static_cast<double>(x)), 2e-6 * std::abs(std::tanh(x))) << x;
  EXPECT_EQ(tanh_fast(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(tanh_fast(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(tanh_fast(std::numeric_limits<float>::quiet_NaN())));
}

// The paged kernels against attention_head over the same keys laid out
// contiguously: blocks scattered in a shuffled order must give the same bits
// (F32), and fp16 storage must give the bits of the contiguous kernel over
// the fp16-rounded values.
TEST(Attention, PagedMatchesContiguousBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int32_t head_dim : {4, 8, 64}) {
    for (int32_t block_size : {16, 32}) {
      for (int32_t n_keys : {1, 16, 17, 40, 97}) {
        const int32_t n_kv_heads = 2, stride = head_dim * n_kv_heads;
        const int32_t n_blocks = (n_keys + block_size - 1) / block_size + 3;  // spare blocks left unused
        // Contiguous reference cache, [n_keys][stride], and its fp16-rounded twin.
        std::vector<float> k(static_cast<size_t>(n_keys) * stride), v(k.size()), q(head_dim);
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        for (float& x : q) x = nd(rng);
        std::vector<float> k16(k.size()), v16(v.size());
        for (size_t i = 0; i < k.size(); ++i) {
          k16[i] = fp16_to_fp32(fp32_to_fp16(k[i]));
          v16[i] = fp16_to_fp32(fp32_to_fp16(v[i]));
        }
        // Paged copies: block = [K rows][V rows] of block_size x stride each.
        std::vector<int32_t> table(static_cast<size_t>(n_blocks));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        const int64_t block_stride = 2 * static_cast<int64_t>(block_size) * stride;
        std::vector<float> paged(static_cast<size_t>(n_blocks * block_stride), std::nanf(""));
        std::vector<uint16_t> paged16(paged.size(), 0x7e00);  // NaN: unused rows must not be read
        for (int32_t p = 0; p < n_keys; ++p)
          for (int32_t i = 0; i < stride; ++i) {
            const int64_t row = table[p / block_size] * block_stride + (p % block_size) * stride + i;
            paged[row] = k[p * stride + i];
            paged[row + block_size * stride] = v[p * stride + i];
            paged16[row] = fp32_to_fp16(k[p * stride + i]);
            paged16[row + block_size * stride] = fp32_to_fp16(v[p * stride + i]);
          }
        const int32_t off = head_dim;  // the second KV head
        const float scale = 0.3f;
        std::vector<float> want(head_dim), got(head_dim), want16(head_dim), got16(head_dim);
        attention_head(q.data(), k.data() + off, v.data() + off, stride, n_keys, head_dim, scale, want.data());
        attention_head(q.data(), k16.data() + off, v16.data() + off, stride, n_keys, head_dim, scale, want16.data());
        PagedKv kv{paged.data() + off, paged.data() + off + block_size * stride, table.data(), block_size,
                   block_stride, stride};
        attention_head_paged(q.data(), kv, n_keys, head_dim, scale, got.data());
        PagedKv kv16{paged16.data() + off, paged16.data() + off + block_size * stride, table.data(), block_size,
                     block_stride, stride};
        attention_head_paged_f16(q.data(), kv16, n_keys, head_dim, scale, got16.data());
        for (int32_t i = 0; i < head_dim; ++i) {
          ASSERT_EQ(got[i], want[i]) << "head_dim " << head_dim << " block " << block_size << " keys " << n_keys;
          ASSERT_EQ(got16[i], want16[i]) << "f16, head_dim " << head_dim << " keys " << n_keys;
        }
      }
    }
  }
}

// A paged cache for the tests below: n_keys positions of `stride` elements
// (all KV heads) in shuffled blocks of [K rows][V rows], block_size x stride
// each, with two spare blocks; the same random values as float32, fp16 and
// Q8_0 (its own random int8 values, fp16 scales per 32 arena elements).
// Unused float rows hold NaN, so a kernel that reads them is caught.
struct PagedCaches {
  int32_t stride = 0, block_size = 0;
  int64_t block_stride = 0;
  std::vector<int32_t> table;
  std::vector<float> f32;
  std::vector<uint16_t> f16, q8_scales;
  std::vector<int8_t> q8;

  PagedCaches(int32_t stride_, int32_t block_size_, int32_t n_keys, std::mt19937& rng)
      : stride(stride_), block_size(block_size_), block_stride(2 * int64_t{block_size_} * stride_) {
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const int32_t n_blocks = (n_keys + block_size - 1) / block_size + 2;
    table.resize(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    f32.assign(static_cast<size_t>(n_blocks * block_stride), std::nanf(""));
    f16.assign(f32.size(), 0x7e00);
    q8.assign(f32.size(), 0);
    q8_scales.resize(f32.size() / 32 + 1);
    for (uint16_t& d : q8_scales) d = fp32_to_fp16(std::uniform_real_distribution<float>(0.01f, 0.05f)(rng));
    for (int32_t p = 0; p < n_keys; ++p)
      for (int32_t i = 0; i < 2 * stride; ++i) {  // K row then V row
        const int64_t at = table[p / block_size] * block_stride + (i / stride) * block_size * stride +
                           (p % block_size) * stride + i % stride;
        f32[at] = nd(rng);
        f16[at] = fp32_to_fp16(f32[at]);
        q8[at] = static_cast<int8_t>(std::uniform_int_distribution<int>(-127, 127)(rng));
      }
  }

  // The KV head whose values start `off` elements into each row.
  PagedKv kv(KvElem elem, int64_t off) const {
    const void* base = elem == KvElem::F32 ? static_cast<const void*>(f32.data())
                       : elem == KvElem::F16 ? static_cast<const void*>(f16.data())
                                             : static_cast<const void*>(q8.data());
    const size_t esize = elem == KvElem::F32 ? 4 : elem == KvElem::F16 ? 2 : 1;
    const auto* b = static_cast<const uint8_t*>(base);
    PagedKv kv{b + off * esize, b + (off + block_size * stride) * esize, table.data(), block_size, block_stride,
               stride};
    kv.scales = q8_scales.data();
    kv.k_elem0 = off, kv.v_elem0 = off + int64_t{block_size} * stride;
    return kv;
  }
};

// One case of the tests below: the kHeads (8 or 16) query heads are heads
// kHeads .. 2 kHeads - 1 of 2 kHeads, so kv points past KV head 0 and a wrong
// offset reads another head's values.
template <int32_t kHeads>
void check_heads_in_lanes(int32_t head_dim, int32_t group, int32_t block_size, int32_t n_keys, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int32_t n_kv_heads = 2 * kHeads / group, stride = head_dim * n_kv_heads;
  const PagedCaches cache(stride, block_size, n_keys, rng);
  std::vector<float> q(static_cast<size_t>(kHeads * head_dim));
  for (float& x : q) x = nd(rng);
  const int32_t h0 = kHeads, off = h0 / group * head_dim;
  const float scale = 0.5f;
  const PagedKv kv = cache.kv(KvElem::F32, off), kv16 = cache.kv(KvElem::F16, off);
  std::vector<float> got(q.size()), got16(q.size());
  if constexpr (kHeads == 8) {
    attention_heads8_paged(q.data(), kv, n_keys, head_dim, group, scale, got.data());
    attention_heads8_paged_f16(q.data(), kv16, n_keys, head_dim, group, scale, got16.data());
  } else {
    attention_heads16_hd4_paged(q.data(), kv, n_keys, scale, got.data());
    attention_heads16_hd4_paged_f16(q.data(), kv16, n_keys, scale, got16.data());
  }
  for (int32_t h = 0; h < kHeads; ++h) {
    const int64_t head_off = ((h0 + h) / group) * head_dim;
    const PagedKv one = cache.kv(KvElem::F32, head_off), one16 = cache.kv(KvElem::F16, head_off);
    std::vector<float> want(static_cast<size_t>(head_dim)), want16(want.size());
    attention_head_paged(&q[h * head_dim], one, n_keys, head_dim, scale, want.data());
    attention_head_paged_f16(&q[h * head_dim], one16, n_keys, head_dim, scale, want16.data());
    for (int32_t i = 0; i < head_dim; ++i) {
      ASSERT_EQ(got[h * head_dim + i], want[i]) << "head " << h << " dim " << i;
      ASSERT_EQ(got16[h * head_dim + i], want16[i]) << "f16, head " << h << " dim " << i;
    }
  }
}

// The eight-head kernels (heads in lanes) against the per-head paged kernels,
// bit for bit: both head sizes, every group size they take (GQA), chunk
// boundaries, two block sizes, wide scores (the running maximum moves), NaN
// in unused rows.
TEST(Attention, EightHeadKernelsMatchPerHeadBitForBit) {
  std::mt19937 rng(11);
  for (int32_t head_dim : {4, 8})
    for (int32_t group : {1, 2, 4, 8})
      for (int32_t block_size : {16, 32})
        for (int32_t n_keys : {1, 2, 15, 16, 17, 40, 97}) {
          SCOPED_TRACE(testing::Message() << "head_dim " << head_dim << " group " << group << " block "
                                          << block_size << " keys " << n_keys);
          check_heads_in_lanes<8>(head_dim, group, block_size, n_keys, rng);
          if (testing::Test::HasFatalFailure()) return;
        }
}

// The sixteen-head kernel (AVX-512) against the per-head ones, bit for bit.
TEST(Attention, SixteenHeadKernelMatchesPerHeadBitForBit) {
  if (!attention_heads16_hd4_supported()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(12);
  for (int32_t block_size : {16, 32})
    for (int32_t n_keys : {1, 2, 15, 16, 17, 40, 97}) {
      SCOPED_TRACE(testing::Message() << "block " << block_size << " keys " << n_keys);
      check_heads_in_lanes<16>(4, 1, block_size, n_keys, rng);
      if (testing::Test::HasFatalFailure()) return;
    }
}

// The prefill kernel (attention_rows_paged: many rows, each K/V chunk read
// once) against the per-head kernels, bit for bit, for every storage: rows
// of GQA heads and causal tokens with their own key counts (chunk edges,
// one key, more rows than one pass of the kernel takes), a shuffled block
// table, NaN in unused rows, head sizes of the SIMD paths and of the generic
// one (12).
TEST(Attention, RowsKernelMatchesPerHeadBitForBit) {
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int32_t head_dim : {4, 12, 64, 128})
    for (int32_t block_size : {16, 32}) {
      const int32_t n_kv_heads = 2, stride = head_dim * n_kv_heads, max_keys = 150;
      const PagedCaches cache(stride, block_size, max_keys, rng);
      const int32_t off = head_dim;  // the second KV head
      // 70 rows: four query heads of one KV head (group 4) for tokens whose
      // key counts cover 1, chunk edges and the whole cache.
      std::vector<int32_t> n_keys;
      for (int32_t t : {1, 2, 15, 16, 17, 31, 32, 33, 60, 97, 120, 140, 149, 150, 150, 5, 16, 64})
        for (int32_t h = 0; h < 4 && n_keys.size() < 70; ++h) n_keys.push_back(t);
      std::vector<float> q(n_keys.size() * head_dim);
      for (float& x : q) x = nd(rng);
      const float scale = 0.4f;
      for (KvElem elem : {KvElem::F32, KvElem::F16, KvElem::Q8_0}) {
        const PagedKv kv = cache.kv(elem, off);
        std::vector<float> got(q.size(), std::nanf("")), want(q.size());
        std::vector<AttnRow> rows;
        for (size_t r = 0; r < n_keys.size(); ++r) rows.push_back({&q[r * head_dim], &got[r * head_dim], n_keys[r]});
        attention_rows_paged(rows, kv, elem, head_dim, scale);
        for (size_t r = 0; r < n_keys.size(); ++r) {
          const float* qr = &q[r * head_dim];
          float* w = &want[r * head_dim];
          if (elem == KvElem::F32) attention_head_paged(qr, kv, n_keys[r], head_dim, scale, w);
          else if (elem == KvElem::F16) attention_head_paged_f16(qr, kv, n_keys[r], head_dim, scale, w);
          else attention_head_paged_q8(qr, kv, n_keys[r], head_dim, scale, w);
          for (int32_t i = 0; i < head_dim; ++i)
            ASSERT_EQ(got[r * head_dim + i], w[i])
                << "storage " << static_cast<int>(elem) << " head_dim " << head_dim << " block " << block_size
                << " row " << r << " keys " << n_keys[r] << " dim " << i;
          ASSERT_TRUE(std::isfinite(w[0]));
        }
      }
    }
}
