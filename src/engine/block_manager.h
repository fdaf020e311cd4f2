// BlockManager: bookkeeping of the paged KV cache (Kwon et al. 2023,
// "Efficient Memory Management for LLM Serving with PagedAttention") with
// automatic prefix caching (as in vLLM's hash-based prefix caching and
// SGLang's RadixAttention: full blocks are shared between sequences).
//
// The cache is n_blocks blocks of block_size token positions (the storage is
// model/kv_cache.h; this class never touches it). Each sequence owns a block
// table: position p lives in row p % block_size of block table[p /
// block_size]. Blocks are allocated as a sequence grows and released when it
// ends; the pool never grows, so the byte budget the pool was sized from is
// never exceeded.
//
// Prefix caching: a FULL block whose K/V has been computed (commit()) is
// identified by a 64-bit hash of its tokens chained with the previous block's
// hash, i.e. by the whole token prefix up to its end. Another sequence whose
// prompt starts with the same tokens takes a reference on it instead of
// recomputing (match_prefix()). A block is in exactly one state:
//   free    refcount 0, no hash                 -> in the free list
//   cached  refcount 0, hashed (reusable)       -> in the LRU list
//   in use  refcount >= 1 (shared when > 1)
// Allocation takes a free block first and only then evicts the least
// recently released cached block. A sequence's blocks are released last to
// first, so a prefix's tail is evicted before its head.
// Shared blocks are always full and never written again (a sequence only
// appends to its own last, partial block), so no copy-on-write is needed.
// Hash collisions: a hit also compares the block's tokens and its parent's
// hash, so two prefixes are confused only if their parents' 64-bit hashes
// collide (probability ~2^-64 per pair).
//
// Not thread-safe: the engine thread owns it. Errors (unknown sequence,
// misuse) throw nexus::Error; running out of blocks is not an error but a
// `false` from append() (the scheduler then preempts or waits).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace nexus {

class BlockManager {
 public:
  using SeqId = uint64_t;

  struct Stats {
    int64_t queried_tokens = 0;  // tokens offered to match_prefix
    int64_t hit_tokens = 0;      // of those, found in the cache
    int64_t evictions = 0;       // cached blocks reclaimed for new data
  };

  // Throws nexus::Error when n_blocks < 1 or block_size < 1.
  explicit BlockManager(int32_t n_blocks, int32_t block_size = 16);

  // A new, empty sequence.
  SeqId create();
  // Releases every block of `seq` (shared ones lose one reference; cached
  // ones stay reusable) and forgets the sequence.
  void release(SeqId seq);

  // For an empty sequence: takes references on the longest run of cached
  // full blocks that `tokens` starts with, appends them (and their tokens) to
  // the sequence as computed, and returns how many tokens that is (a multiple
  // of block_size). At most tokens.size() - 1 tokens are matched, so at least
  // the last one is left to evaluate (its logits are needed). Throws when the
  // sequence is not empty.
  int32_t match_prefix(SeqId seq, std::span<const int32_t> tokens);

  // New blocks `seq` needs to append n more tokens.
  int32_t blocks_needed(SeqId seq, int32_t n) const;
  bool can_append(SeqId seq, int32_t n) const { return blocks_needed(seq, n) <= n_available(); }
  // Reserves positions for `tokens` after the sequence's current end,
  // allocating (and, if needed, evicting) blocks. Returns false and changes
  // nothing when there are not enough blocks. The caller then writes their
  // K/V (batch_forward) and calls commit().
  bool append(SeqId seq, std::span<const int32_t> tokens);
  // Shortens `seq` to its first n tokens (n is clamped to [0, n_tokens])
  // and returns how many it keeps: n, or less when position n falls inside
  // a full hashed block -- such a block may be shared and is never written
  // again, so it is dropped whole (the caller re-evaluates the tokens from
  // the returned count). A kept partial block is private: later appends
  // overwrite its rows past n. Blocks dropped lose one reference.
  int32_t truncate(SeqId seq, int32_t n);
  // Marks every appended token as computed: the sequence's full blocks become
  // reusable by other sequences. Call after the forward pass that wrote them.
  void commit(SeqId seq);

  std::span<const int32_t> block_table(SeqId seq) const;
  int32_t n_tokens(SeqId seq) const;  // appended so far (computed or not)
  std::span<const int32_t> tokens(SeqId seq) const;

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_cached() const { return n_lru_; }
  int32_t n_used() const { return n_blocks() - n_free() - n_cached(); }
  int32_t n_available() const { return n_free() + n_cached(); }  // free or evictable
  int32_t n_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  int32_t ref_count(int32_t block) const { return blocks_.at(static_cast<size_t>(block)).ref; }
  const Stats& stats() const { return stats_; }

  // Checks every invariant above (states partition the pool, reference
  // counts equal table occurrences, hash index consistent); throws
  // nexus::Error naming the first violation. O(n_blocks + table sizes).
  void validate() const;

 private:
  struct Block {
    int32_t ref = 0;
    bool hashed = false;
    uint64_t hash = 0, parent = 0;  // valid when hashed
    int32_t lru_prev = -1, lru_next = -1;
  };
  struct Seq {
    std::vector<int32_t> table, tokens;
    int32_t n_hashed = 0;      // leading full blocks whose chain hash is known
    uint64_t last_hash = 0;    // chain hash after those blocks
  };

  Seq& get(SeqId seq);
  const Seq& get(SeqId seq) const;
  int32_t allocate();  // precondition: n_available() > 0
  void unref(int32_t block);
  void lru_push(int32_t block);
  void lru_remove(int32_t block);
  bool same_tokens(int32_t block, const int32_t* tokens) const;

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> block_tokens_;  // [n_blocks][block_size], valid when hashed
  std::vector<int32_t> free_;          // stack; back() is allocated next
  int32_t lru_head_ = -1, lru_tail_ = -1, n_lru_ = 0;  // head = least recently released
  std::unordered_map<uint64_t, int32_t> cache_;        // chain hash -> block
  std::unordered_map<SeqId, Seq> seqs_;
  SeqId next_id_ = 1;
  Stats stats_;
};

}  // namespace nexus
