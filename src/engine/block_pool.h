// BlockPool: one pool of KV blocks and its share of the prefix cache -- the
// mechanics under BlockManager (engine/block_manager.h), which has one pool
// for the global layers and, for models with sliding-window layers, one for
// the windowed layers (model/kv_cache.h KvPool).
//
// A block is in exactly one state:
//   free    refcount 0, no hash                 -> in the free list
//   cached  refcount 0, hashed (reusable)       -> in the LRU list
//   in use  refcount >= 1 (shared when > 1)
// allocate() takes a free block first and only then evicts the least
// recently released cached block (its hash is forgotten). A hashed block is
// found by the chain hash of the token prefix up to its end (BlockManager
// computes it); a hit also compares the block's tokens and its parent's
// hash, so two prefixes are confused only if their parents' 64-bit hashes
// collide (~2^-64 per pair).
//
// Not thread-safe. Block ids are [0, n_blocks); preconditions (a valid id,
// a block in use for unref) are the caller's, checked by validate().
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace nexus {

class BlockPool {
 public:
  // Precondition: n_blocks >= 0, block_size >= 1 (BlockManager checks).
  BlockPool(int32_t n_blocks, int32_t block_size);

  // A block with refcount 1. Precondition: n_available() > 0.
  int32_t allocate();
  // One more reference to b (a prefix-cache hit); a cached block leaves the LRU.
  void ref(int32_t b);
  // One reference less; at 0 the block is cached when hashed, else free.
  void unref(int32_t b);

  // The block holding the prefix whose chain hash is h, whose parent's hash
  // is `parent` and whose block_size tokens are `tokens`; -1 when none.
  int32_t find(uint64_t h, uint64_t parent, const int32_t* tokens) const;
  // Makes the in-use block b findable as (h, parent, tokens), unless it
  // already is or another block holds h (the first block computed for a
  // prefix is the one others find; a duplicate stays private).
  void publish(int32_t b, uint64_t h, uint64_t parent, const int32_t* tokens);
  bool hashed(int32_t b) const { return blocks_[static_cast<size_t>(b)].hashed; }

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_cached() const { return n_lru_; }
  int32_t n_used() const { return n_blocks() - n_free() - n_cached(); }
  int32_t n_available() const { return n_free() + n_cached(); }  // free or evictable
  int32_t ref_count(int32_t b) const { return blocks_.at(static_cast<size_t>(b)).ref; }
  int64_t evictions() const { return evictions_; }

  // Checks the states above against refs[b], the references the block
  // tables hold on each block; throws nexus::Error naming `what` and the
  // first violation.
  void validate(std::span<const int32_t> refs, const char* what) const;

 private:
  struct Block {
    int32_t ref = 0;
    bool hashed = false;
    uint64_t hash = 0, parent = 0;  // valid when hashed
    int32_t lru_prev = -1, lru_next = -1;
  };
  void lru_push(int32_t b);
  void lru_remove(int32_t b);

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> block_tokens_;  // [n_blocks][block_size], valid when hashed
  std::vector<int32_t> free_;          // stack; back() is allocated next
  int32_t lru_head_ = -1, lru_tail_ = -1, n_lru_ = 0;  // head = least recently released
  std::unordered_map<uint64_t, int32_t> cache_;        // chain hash -> block
  int64_t evictions_ = 0;
};

}  // namespace nexus
