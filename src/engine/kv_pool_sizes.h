// How the engine divides its KV memory budget (EngineOptions::kv_memory)
// between the pools of the paged KV cache (model/kv_cache.h KvPool).
//
// A model without sliding-window layers has one pool: budget / block_bytes
// blocks, the budget by default room for max_seqs full contexts
// (ceil(n_ctx / block_size) blocks each), at most a quarter of the available
// RAM.
//
// A model with windowed layers (LlamaConfig::is_swa) keeps them in a second
// pool, whose blocks a sequence gives back as its window slides
// (engine/block_manager.h): one sequence holds at most
//   W = min(ceil(n_ctx / bs), ceil((n_swa - 1 + max_batch_tokens) / bs) + 1)
// windowed blocks (a prefill chunk of max_batch_tokens after its window).
// The default is max_seqs full contexts of global blocks and max_seqs * W
// windowed ones; an explicit (or RAM-capped) budget is split in that ratio,
// W / ceil(n_ctx / bs) windowed blocks per global block, with at least W
// windowed blocks so that one sequence always runs -- or, when the budget
// holds no k > W blocks of every layer, k of each (the context is then capped
// to k blocks, and a sequence holds at most k windowed ones). A model whose layers are
// all windowed has a global pool of 0 bytes a block (it only numbers the
// positions), sized in the same ratio.
#pragma once

#include <cstdint>

#include "engine/engine.h"

namespace nexus {

struct LlamaConfig;

struct KvPoolSizes {
  int32_t n_blocks = 0;      // global pool (all layers when n_swa_blocks == 0)
  int32_t n_swa_blocks = 0;  // windowed pool; 0 = none
};

// Throws nexus::Error when kv_memory is negative or the budget holds no
// block (or not the W windowed blocks one sequence needs), naming the bytes.
KvPoolSizes kv_pool_sizes(const LlamaConfig& c, const EngineOptions& o, int32_t n_ctx);

}  // namespace nexus
