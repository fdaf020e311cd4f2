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
// recomputing (match_prefix()). Block states, allocation and eviction (free,
// cached in an LRU, in use) are engine/block_pool.h's. A sequence's blocks
// are released last to first, so a prefix's tail is evicted before its head.
// Shared blocks are always full and never written again (a sequence only
// appends to its own last, partial block), so no copy-on-write is needed.
//
// Sliding window (Beltagy et al. 2020; Mistral 7B; Gemma 2): for a model
// whose windowed layers keep their own pool (model/kv_cache.h KvPool; the
// engine splits every model that has such layers), each sequence has a
// second block table, for the windowed layers, in step with the first (entry
// i covers the same positions). A query at position q of a windowed layer
// reads only positions > q - window; once a sequence's tokens up to n are
// computed, every later query is at n or beyond, so commit() gives back the
// windowed blocks wholly before n - window + 1 (their entries become
// kNoBlock) while the global table keeps the whole history. A decoding
// sequence thus holds at most ceil(window / block_size) + 1 windowed blocks
// (a prefill chunk of c tokens: ceil((window - 1 + c) / block_size) + 1);
// stats().swa_blocks_per_seq_max records the most any one sequence held.
// The prefix cache stays correct: windowed blocks are hashed like global
// ones (same chain hash, their own index) and cached when given back, and
// match_prefix() reuses a prefix of m tokens only when the windowed blocks
// its next query reads (positions m - window + 1 .. m - 1) are all still
// cached; otherwise it falls back to the longest shorter prefix that has
// them (or none). truncate() likewise never keeps a prefix whose windowed
// blocks near its end were given back.
//
// Not thread-safe: the engine thread owns it. Errors (unknown sequence,
// misuse) throw nexus::Error; running out of blocks is not an error but a
// `false` from append() (the scheduler then preempts or waits).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.h"

namespace nexus {

class BlockManager {
 public:
  using SeqId = uint64_t;
  static constexpr int32_t kNoBlock = -1;  // a windowed-table entry given back

  struct Stats {
    int64_t queried_tokens = 0;  // tokens offered to match_prefix
    int64_t hit_tokens = 0;      // of those, found in the cache
    int64_t evictions = 0;       // cached blocks reclaimed for new data (global pool)
    int64_t swa_evictions = 0;   // the same in the windowed pool
    int32_t swa_blocks_per_seq_max = 0;  // most windowed blocks one sequence has held at once
  };

  // n_blocks blocks of block_size positions for the global layers (all
  // layers without a window pool). window > 0 and n_swa_blocks > 0: the
  // windowed layers' pool of n_swa_blocks blocks, whose layers attend to
  // `window` positions (the query's own included; LlamaConfig::n_swa). Throws
  // nexus::Error when n_blocks < 1, block_size < 1, or exactly one of window
  // and n_swa_blocks is positive or either is negative.
  explicit BlockManager(int32_t n_blocks, int32_t block_size = 16, int32_t n_swa_blocks = 0, int32_t window = 0);

  // A new, empty sequence.
  SeqId create();
  // Releases every block of `seq` (shared ones lose one reference; cached
  // ones stay reusable) and forgets the sequence.
  void release(SeqId seq);

  // For an empty sequence: takes references on the longest run of cached
  // full blocks that `tokens` starts with (and, with a window pool, whose
  // windowed blocks the next query reads are cached too), appends them (and
  // their tokens) to the sequence as computed, and returns how many tokens
  // that is (a multiple of block_size). At most tokens.size() - 1 tokens are
  // matched, so at least the last one is left to evaluate (its logits are
  // needed). Throws when the sequence is not empty.
  int32_t match_prefix(SeqId seq, std::span<const int32_t> tokens);

  // New blocks `seq` needs to append n more tokens (in each pool: the
  // tables grow in step).
  int32_t blocks_needed(SeqId seq, int32_t n) const;
  // Whether the global pool has blocks for n more tokens and the windowed
  // pool for the first n_now of them (n_now < 0: all n) -- the ones the next
  // step appends; the windowed blocks of later chunks come from those given
  // back as the window slides.
  bool can_append(SeqId seq, int32_t n, int32_t n_now = -1) const;
  // Reserves positions for `tokens` after the sequence's current end,
  // allocating (and, if needed, evicting) blocks. Returns false and changes
  // nothing when there are not enough blocks. The caller then writes their
  // K/V (batch_forward) and calls commit().
  bool append(SeqId seq, std::span<const int32_t> tokens);
  // Shortens `seq` to its first n tokens (n is clamped to [0, n_tokens])
  // and returns how many it keeps: n, or less when position n falls inside
  // a full hashed block -- such a block may be shared and is never written
  // again, so it is dropped whole (the caller re-evaluates the tokens from
  // the returned count) -- and 0 when the windowed blocks a query at the
  // kept end would read were already given back. A kept partial block is
  // private: later appends overwrite its rows past n. Blocks dropped lose one
  // reference.
  int32_t truncate(SeqId seq, int32_t n);
  // Marks every appended token as computed: the sequence's full blocks become
  // reusable by other sequences, and the windowed blocks no later query
  // reads are given back. Call after the forward pass that wrote them.
  void commit(SeqId seq);

  std::span<const int32_t> block_table(SeqId seq) const;
  // The windowed layers' table (same length as block_table; kNoBlock before
  // the window), empty without a window pool.
  std::span<const int32_t> swa_block_table(SeqId seq) const;
  // Windowed blocks `seq` holds now (0 without a window pool).
  int32_t n_swa_held(SeqId seq) const;
  int32_t n_tokens(SeqId seq) const;  // appended so far (computed or not)
  std::span<const int32_t> tokens(SeqId seq) const;

  int32_t n_blocks() const { return global_.n_blocks(); }
  int32_t block_size() const { return block_size_; }
  int32_t n_free() const { return global_.n_free(); }
  int32_t n_cached() const { return global_.n_cached(); }
  int32_t n_used() const { return global_.n_used(); }
  int32_t n_available() const { return global_.n_available(); }  // free or evictable
  int32_t n_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  int32_t ref_count(int32_t block) const { return global_.ref_count(block); }
  // The windowed pool (all 0 without one) and its window in positions.
  bool has_window_pool() const { return window_ > 0; }
  int32_t window() const { return window_; }
  const BlockPool& swa_pool() const { return swa_; }
  Stats stats() const;

  // Checks every invariant above (states partition each pool, reference
  // counts equal table occurrences, hash indexes consistent, windowed tables
  // in step with the global ones and given back only before the window);
  // throws nexus::Error naming the first violation. O(n_blocks + table sizes).
  void validate() const;

 private:
  struct Seq {
    std::vector<int32_t> table, swa_table, tokens;
    int32_t swa_first = 0;     // swa_table[0, swa_first) were given back
    int32_t n_hashed = 0;      // leading full blocks whose chain hash is known
    uint64_t last_hash = 0;    // chain hash after those blocks
  };

  Seq& get(SeqId seq);
  const Seq& get(SeqId seq) const;
  // The first windowed block a query at position `pos` (and every later
  // one) reads: max(0, pos - window + 1) / block_size.
  int32_t swa_first_needed(int64_t pos) const;
  void note_swa_held(const Seq& s);

  int32_t block_size_;
  int32_t window_ = 0;
  BlockPool global_, swa_;
  std::unordered_map<SeqId, Seq> seqs_;
  SeqId next_id_ = 1;
  Stats stats_;
};

}  // namespace nexus
