#include "engine/kv_pool_sizes.h"

#include <algorithm>
#include <limits>
#include <string>

#include "model/kv_cache.h"
#include "model/llama_config.h"
#include "util/error.h"
#include "util/system_memory.h"

namespace nexus {
namespace {

constexpr int64_t kMaxBlocks = std::numeric_limits<int32_t>::max();

int32_t clamp_blocks(unsigned __int128 n) {
  return static_cast<int32_t>(std::min<unsigned __int128>(n, static_cast<unsigned __int128>(kMaxBlocks)));
}

Error no_block(int64_t budget, size_t block) {
  return Error("engine: a KV memory budget of " + std::to_string(budget) + " bytes holds no block (one block of " +
               std::to_string(kDefaultBlockSize) + " tokens takes " + std::to_string(block) + " bytes)");
}

}  // namespace

KvPoolSizes kv_pool_sizes(const LlamaConfig& c, const EngineOptions& o, int32_t n_ctx) {
  constexpr int32_t bs = kDefaultBlockSize;
  if (o.kv_memory < 0) throw Error("engine: kv_memory must not be negative");
  const int64_t per_seq = (static_cast<int64_t>(n_ctx) + bs - 1) / bs;
  const int64_t ram_cap = available_ram_bytes() > 0 ? available_ram_bytes() / 4 : 0;
  bool windowed = false;
  for (int32_t l = 0; l < c.n_layer; ++l) windowed = windowed || c.is_swa(l);

  if (!windowed) {
    const size_t block = KvCache::block_bytes(c, bs, o.kv_type);
    int64_t budget = o.kv_memory;
    if (budget == 0) {
      budget = static_cast<int64_t>(block) * per_seq * o.max_seqs;
      if (ram_cap > 0) budget = std::min(budget, ram_cap);
    }
    const int32_t n = KvCache::blocks_for_budget(c, static_cast<size_t>(budget), bs, o.kv_type);
    if (n < 1) throw no_block(budget, block);
    return {n, 0};
  }

  const auto bg = static_cast<unsigned __int128>(KvCache::block_bytes(c, bs, o.kv_type, KvPool::Global));
  const auto bw = static_cast<unsigned __int128>(KvCache::block_bytes(c, bs, o.kv_type, KvPool::Windowed));
  const int64_t w = std::min<int64_t>(per_seq, (static_cast<int64_t>(c.n_swa) - 1 + o.max_batch_tokens + bs - 1) / bs + 1);
  const auto seqs = static_cast<unsigned __int128>(o.max_seqs);
  const unsigned __int128 full_g = per_seq * seqs, full_w = w * seqs;
  int64_t budget = o.kv_memory;
  if (budget == 0) {
    if (ram_cap <= 0 || full_g * bg + full_w * bw <= static_cast<unsigned __int128>(ram_cap))
      return {clamp_blocks(full_g), clamp_blocks(full_w)};
    budget = ram_cap;
  }
  const auto b = static_cast<unsigned __int128>(budget);
  // A budget too small for a context of w blocks: the context gets capped to
  // the global pool, and a sequence of k <= w blocks holds k windowed ones.
  const unsigned __int128 k = b / (bg + bw);
  if (k < 1) throw no_block(budget, static_cast<size_t>(bg + bw));
  if (k <= static_cast<unsigned __int128>(w)) return {clamp_blocks(k), clamp_blocks(k)};
  // Global blocks ng with ng * w / per_seq windowed ones each:
  // ng * (bg * per_seq + bw * w) / per_seq bytes; at least w windowed.
  unsigned __int128 ng = b * per_seq / (bg * per_seq + bw * w);
  unsigned __int128 nw = std::max<unsigned __int128>(w, (ng * w + per_seq - 1) / per_seq);
  nw = std::min(nw, b / bw);
  if (bg > 0) ng = std::min(ng, (b - nw * bw) / bg);
  return {clamp_blocks(ng), clamp_blocks(nw)};
}

}  // namespace nexus
