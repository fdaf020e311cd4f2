// KvCache: sizing from a byte budget, the block layout, and F32/F16 storage.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/quant_blocks.h"
#include "model/arch.h"
#include "model/kv_cache.h"
#include "model/llama_config.h"
#include "util/error.h"

using namespace nexus;

namespace {

LlamaConfig tiny_config() {
  LlamaConfig c;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 8;
  c.n_embd = 32;
  return c;
}

}  // namespace

TEST(KvCache, BlockBytesFollowTheLayout) {
  const LlamaConfig c = tiny_config();  // n_embd_kv = 16
  EXPECT_EQ(KvCache::block_bytes(c, 16, KvType::F16), 2u * 3 * 16 * 16 * 2);
  EXPECT_EQ(KvCache::block_bytes(c, 32, KvType::F32), 2u * 3 * 32 * 16 * 4);
  const size_t per = KvCache::block_bytes(c, 16, KvType::F16);
  EXPECT_EQ(KvCache::blocks_for_budget(c, 10 * per + per - 1, 16, KvType::F16), 10);
  EXPECT_EQ(KvCache::blocks_for_budget(c, per - 1, 16, KvType::F16), 0);
  KvCache cache(c, 10, 16, KvType::F16);
  EXPECT_EQ(cache.total_bytes(), 10 * per);  // never more than the budget it was sized from
}

TEST(KvCache, OffsetsTileTheArenaWithoutOverlap) {
  const LlamaConfig c = tiny_config();
  KvCache cache(c, 4, 16, KvType::F32);
  // Each (block, layer, K|V) owns [offset, offset + block_size * n_embd_kv).
  const int64_t slab = 16 * c.n_embd_kv();
  std::vector<int> owner(static_cast<size_t>(cache.block_elems() * 4), 0);
  for (int32_t b = 0; b < 4; ++b)
    for (int32_t l = 0; l < c.n_layer; ++l)
      for (int64_t off : {cache.k_offset(b, l), cache.v_offset(b, l)})
        for (int64_t i = 0; i < slab; ++i) ++owner.at(static_cast<size_t>(off + i));
  for (int o : owner) ASSERT_EQ(o, 1);
}

TEST(KvCache, WriteReadRoundTrips) {
  const LlamaConfig c = tiny_config();
  std::vector<float> k(16), v(16), out(16);
  for (int i = 0; i < 16; ++i) {
    k[i] = 0.1f * i - 0.77f;
    v[i] = std::ldexp(1.0f, -i) + 1e-4f;
  }
  KvCache f32(c, 2, 16, KvType::F32);
  f32.write(1, 2, 15, k.data(), v.data());
  f32.read_k(1, 2, 15, out.data());
  EXPECT_EQ(out, k);
  f32.read_v(1, 2, 15, out.data());
  EXPECT_EQ(out, v);

  KvCache f16(c, 2, 16, KvType::F16);
  f16.write(0, 1, 3, k.data(), v.data());
  f16.read_v(0, 1, 3, out.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], fp16_to_fp32(fp32_to_fp16(v[i])));
  f16.read_k(0, 1, 3, out.data());
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(out[i], k[i], std::abs(k[i]) * 1e-3f);
}

TEST(KvCache, RejectsBadSizes) {
  const LlamaConfig c = tiny_config();
  EXPECT_THROW(KvCache(c, 0), Error);
  EXPECT_THROW(KvCache(c, 4, 8), Error);   // not a multiple of the attention chunk
  EXPECT_THROW(KvCache(c, 4, 24), Error);
  EXPECT_THROW(KvCache(c, 4, -16), Error);
  // 2e9 blocks of 384 KiB: past the 2^48-byte cap, refused before any allocation.
  EXPECT_THROW(KvCache(c, 2000000000, 1024, KvType::F32), Error);
}

TEST(KvCache, Q8_0StoresGroupsOf32WithOneScaleEach) {
  LlamaConfig c = tiny_config();
  c.n_head_kv = 4;  // n_embd_kv = 32: one group per row
  EXPECT_THROW(KvCache(tiny_config(), 2, 16, KvType::Q8_0), Error) << "n_embd_kv 16 is not a multiple of 32";
  EXPECT_EQ(KvCache::block_bytes(c, 16, KvType::Q8_0), 2u * 3 * 16 * 32 + 2u * 3 * 16 * 2);
  KvCache q8(c, 3, 16, KvType::Q8_0);
  EXPECT_GE(q8.total_bytes(), 3 * KvCache::block_bytes(c, 16, KvType::Q8_0));
  std::vector<float> k(32), v(32), out(32);
  for (int i = 0; i < 32; ++i) {
    k[i] = std::sin(0.3f * i) * 2.5f;
    v[i] = i == 7 ? -4.0f : 0.01f * i;
  }
  q8.write(2, 1, 9, k.data(), v.data());
  q8.read_k(2, 1, 9, out.data());
  float amax = 0;
  for (float x : k) amax = std::max(amax, std::abs(x));
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(out[i], k[i], amax / 127 * 0.51f + 1e-3f) << i;  // half a step (+ fp16 scale)
  q8.read_v(2, 1, 9, out.data());
  EXPECT_NEAR(out[7], -4.0f, 4.0f * 1e-3f);  // the largest value: exact up to the fp16 scale's rounding
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(out[i], v[i], 4.0f / 127 * 0.51f + 1e-3f) << i;
  // Other rows are untouched (zero is stored as zero).
  const std::vector<float> zero(32, 0.0f);
  q8.write(0, 0, 0, zero.data(), zero.data());
  q8.read_k(0, 0, 0, out.data());
  EXPECT_EQ(out, zero);
  EXPECT_EQ(kv_type_from_name("q8_0"), KvType::Q8_0);
  EXPECT_EQ(kv_type_from_name("Q8_0"), KvType::Q8_0);  // names are case-insensitive
  EXPECT_EQ(kv_type_from_name("F16"), KvType::F16);
  EXPECT_STREQ(kv_type_name(KvType::Q8_0), "q8_0");
  EXPECT_EQ(kv_type_from_name("q4_0"), std::nullopt);
  EXPECT_EQ(kv_type_from_name("q8_"), std::nullopt);
  EXPECT_EQ(kv_type_from_name("q8_00"), std::nullopt);
}

namespace {

// tiny_config with gemma2's pattern: a window on layers 0 and 2 of 4.
LlamaConfig windowed_config() {
  LlamaConfig c = tiny_config();
  c.traits = find_arch("gemma2");
  c.n_layer = 4;
  c.n_swa = 8;
  return c;
}

}  // namespace

TEST(KvCache, SplitCacheGivesTheWindowedLayersTheirOwnPool) {
  const LlamaConfig c = windowed_config();
  const size_t all = KvCache::block_bytes(c, 16, KvType::F32);
  EXPECT_EQ(KvCache::block_bytes(c, 16, KvType::F32, KvPool::Global), all / 2);
  EXPECT_EQ(KvCache::block_bytes(c, 16, KvType::F32, KvPool::Windowed), all / 2);
  KvCache cache(c, 3, 16, KvType::F32, 5);
  ASSERT_TRUE(cache.split());
  EXPECT_EQ(cache.n_blocks(), 3);
  EXPECT_EQ(cache.n_swa_blocks(), 5);
  EXPECT_EQ(cache.total_bytes(), (3 + 5) * all / 2);
  const int64_t slab = 16 * c.n_embd_kv();
  std::vector<int> owner(static_cast<size_t>(cache.total_bytes() / 4), 0);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    EXPECT_EQ(cache.pool(l), l % 2 == 0 ? KvPool::Windowed : KvPool::Global) << l;
    EXPECT_EQ(cache.block_stride(l), 2 * 2 * slab) << "two layers of K and V per block in either pool";
    const int32_t n = l % 2 == 0 ? 5 : 3;
    for (int32_t b = 0; b < n; ++b)
      for (int64_t off : {cache.k_offset(b, l), cache.v_offset(b, l)})
        for (int64_t i = 0; i < slab; ++i) ++owner.at(static_cast<size_t>(off + i));
  }
  for (int o : owner) ASSERT_EQ(o, 1);  // the two pools tile the arena
  std::vector<float> k(16, 0.5f), v(16, -2.0f), out(16);
  cache.write(4, 2, 7, k.data(), v.data());  // windowed block 4: only the windowed pool has it
  cache.read_v(4, 2, 7, out.data());
  EXPECT_EQ(out, v);
}

TEST(KvCache, UnsplitCacheKeepsTheSinglePoolLayout) {
  const LlamaConfig c = windowed_config();
  KvCache one(c, 4, 16, KvType::F32);
  EXPECT_FALSE(one.split());
  for (int32_t l = 0; l < c.n_layer; ++l) {
    EXPECT_EQ(one.pool(l), KvPool::Global);
    EXPECT_EQ(one.k_offset(2, l), 2 * one.block_elems() + l * 2 * 16 * c.n_embd_kv());
    EXPECT_EQ(one.block_stride(l), one.block_elems());
  }
  EXPECT_THROW(KvCache(tiny_config(), 4, 16, KvType::F16, 2), Error) << "no windowed layers to pool";
  EXPECT_THROW(KvCache(c, 4, 16, KvType::F16, -1), Error);
}
