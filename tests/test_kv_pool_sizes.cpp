// kv_pool_sizes: one pool for a model without windowed layers (as before
// sliding windows had a pool), and for one with them a windowed pool sized
// by the window, an explicit budget split in the same ratio, never fewer
// windowed blocks than one sequence needs.
#include <gtest/gtest.h>

#include "engine/kv_pool_sizes.h"
#include "model/arch.h"
#include "model/kv_cache.h"
#include "model/llama_config.h"
#include "util/error.h"

using namespace nexus;

namespace {

LlamaConfig config(const char* arch, int32_t n_swa) {
  LlamaConfig c;
  c.traits = find_arch(arch);
  c.n_layer = 4;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 8;
  c.n_embd = 32;
  c.n_swa = n_swa;
  return c;
}

EngineOptions options(int32_t max_seqs, int32_t max_batch_tokens, int64_t kv_memory) {
  EngineOptions o;
  o.max_seqs = max_seqs;
  o.max_batch_tokens = max_batch_tokens;
  o.kv_memory = kv_memory;
  return o;
}

}  // namespace

TEST(KvPoolSizes, AModelWithoutWindowsHasOnePool) {
  const LlamaConfig c = config("llama", 0);
  const size_t block = KvCache::block_bytes(c, 16, KvType::F16);
  const KvPoolSizes s = kv_pool_sizes(c, options(2, 128, static_cast<int64_t>(block) * 10 + 5), 1024);
  EXPECT_EQ(s.n_blocks, 10);
  EXPECT_EQ(s.n_swa_blocks, 0);
  EXPECT_THROW(kv_pool_sizes(c, options(2, 128, 1), 1024), Error);
  EXPECT_THROW(kv_pool_sizes(c, options(2, 128, -1), 1024), Error);
}

TEST(KvPoolSizes, TheWindowedPoolIsSizedByTheWindow) {
  const LlamaConfig c = config("gemma2", 8);  // layers 0 and 2 windowed
  // Default: 3 full contexts of 1024 (64 blocks) and, per sequence,
  // ceil((8 - 1 + 32) / 16) + 1 = 4 windowed blocks.
  KvPoolSizes s = kv_pool_sizes(c, options(3, 32, 0), 1024);
  EXPECT_EQ(s.n_blocks, 3 * 64);
  EXPECT_EQ(s.n_swa_blocks, 3 * 4);
  // An explicit budget of 100 blocks of every layer (half global, half
  // windowed bytes): 4 windowed blocks per 64 global ones.
  const int64_t half = static_cast<int64_t>(KvCache::block_bytes(c, 16, KvType::F16, KvPool::Global));
  s = kv_pool_sizes(c, options(3, 32, 200 * half), 1024);
  EXPECT_EQ(s.n_blocks, 188);     // floor(200 * 64 / 68)
  EXPECT_EQ(s.n_swa_blocks, 12);  // ceil(188 * 4 / 64)
  EXPECT_LE(s.n_blocks + s.n_swa_blocks, 200);
  // A small budget still gives the 4 one sequence needs.
  s = kv_pool_sizes(c, options(3, 32, 10 * half), 1024);
  EXPECT_EQ(s.n_swa_blocks, 4);
  EXPECT_EQ(s.n_blocks, 6);
  // Too small for a context of 4 blocks: 2 of each (the context is capped
  // to 32 positions, all of them windowed blocks too).
  s = kv_pool_sizes(c, options(3, 32, 4 * half), 1024);
  EXPECT_EQ(s.n_blocks, 2);
  EXPECT_EQ(s.n_swa_blocks, 2);
  EXPECT_THROW(kv_pool_sizes(c, options(3, 32, 2 * half - 1), 1024), Error) << "not one block of every layer";
}

TEST(KvPoolSizes, AWindowWiderThanTheContextCostsWhatOnePoolDoes) {
  const LlamaConfig c = config("mistral", 4096);  // every layer windowed
  const int64_t block = static_cast<int64_t>(KvCache::block_bytes(c, 16, KvType::F16));
  const KvPoolSizes s = kv_pool_sizes(c, options(2, 128, 8 * block), 1024);
  EXPECT_EQ(s.n_swa_blocks, 8);
  EXPECT_EQ(s.n_blocks, 8);  // 0 bytes each: they number the positions
}
