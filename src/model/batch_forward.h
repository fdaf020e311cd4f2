// BatchForward: one forward pass of a LlamaModel (any family: model/layer.h) over a batch made of several
// sequences' token runs, reading and writing K/V in a paged KvCache -- the
// model side of continuous batching (Yu et al. 2022, "Orca": iteration-level
// scheduling; Kwon et al. 2023, "PagedAttention").
//
// A step's batch mixes decode runs (one token of a running sequence) and
// prefill chunks (several prompt tokens of a sequence being admitted). All
// tokens of the step go through ONE matmul per weight ([n_tokens, n_cols]
// activations); RoPE uses each token's own position; each token's K/V is
// written into its sequence's blocks before any attention of that layer, and
// each token attends over positions [0, its position] of its own sequence
// through the sequence's block table (attention_head_paged).
//
// Determinism: with float weights, every token's logits are the same bits
// whatever else shares the batch and however its prompt was chunked (each
// row of a matmul is computed alone, attention always reads K/V back from
// the cache in the same chunks of 16 positions).
// Quantized weights switch to other kernels for large batches (matmul.h), so
// there results agree only to rounding.
//
// Not thread-safe; owns its worker threads. Which blocks a sequence owns is
// the caller's business (engine/block_manager.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace nexus {

class KvCache;
class LlamaModel;
struct PagedKv;
class ThreadPool;
struct Activations;
struct TokenRange;

// One sequence's tokens in a batch.
struct SeqRun {
  std::span<const int32_t> tokens;       // positions n_past .. n_past + size - 1; not empty
  int32_t n_past = 0;                    // positions of this sequence already in the cache
  std::span<const int32_t> block_table;  // the sequence's blocks, covering n_past + tokens.size() positions
  bool want_logits = true;               // return the logits of the run's last token
  bool all_logits = false;               // return the logits of every token of the run
  // The windowed layers' blocks when the cache keeps them in their own pool
  // (KvCache::split()), as long as block_table; entries wholly before the
  // first run token's window (positions < n_past - n_swa + 1) may be -1
  // (given back: engine/block_manager.h). Unused otherwise.
  std::span<const int32_t> swa_block_table;
};

class BatchForward {
 public:
  // `cache` must have been made for `model` (same layer count and KV width);
  // both must outlive this object. n_threads: kernel threads including the
  // caller, 0 = hardware concurrency. n_ctx: the context per sequence the
  // caller runs (positions; 0 = the model's n_ctx_train), which chooses
  // phi3's LongRoPE factors (LlamaModel::rope_factors_for). Throws
  // nexus::Error on a mismatch or a head size above kMaxHeadDim.
  BatchForward(const LlamaModel& model, KvCache& cache, int32_t n_threads = 0, int32_t n_ctx = 0);
  // The same on another BatchForward's kernel threads (`pool` must outlive
  // this object and is never used by both at once: a draft model's passes
  // run between the target's on the same thread, engine/spec/draft_model.h).
  BatchForward(const LlamaModel& model, KvCache& cache, ThreadPool& pool, int32_t n_ctx = 0);
  ~BatchForward();
  BatchForward(const BatchForward&) = delete;
  BatchForward& operator=(const BatchForward&) = delete;

  // Runs every run of `runs` through the model in one pass and writes their
  // K/V. Returns [n, n_vocab] float32 logits, one row per run with
  // want_logits (one per token with all_logits), in the order of `runs`
  // (valid until the next call).
  // Preconditions the caller guarantees: no two runs belong to the same
  // sequence, and no run writes into a block another sequence reads (shared
  // blocks are full, so they lie before every sharer's n_past).
  // Throws nexus::Error, before touching the cache, when `runs` is empty, a
  // run is empty, an id is outside [0, n_vocab), a position would reach the
  // model's training context, a block table is too short or names a block
  // outside the cache (for a split cache: the windowed table too, from the
  // window of the run's first token on).
  std::span<const float> forward(std::span<const SeqRun> runs);

  // The same pass, for embeddings: returns [n_tokens, n_embd] float32, every
  // token's final hidden state (after the output norm, before the output
  // matrix), in the order of the runs' tokens (valid until the next call);
  // want_logits / all_logits are ignored. Same preconditions and errors.
  std::span<const float> hidden_states(std::span<const SeqRun> runs);

  // Whether forward(runs) takes the batch split by token: a decode-only batch
  // (one token per run, at least two runs per thread) on two or more threads, for a
  // model whose layer weights fit in 512 KiB (they are then read by every
  // thread). Each thread runs its share of the tokens through every layer
  // alone, one fork/join per pass instead of several per layer; the results
  // are the same bits either way.
  bool splits_by_token(std::span<const SeqRun> runs) const;

  const KvCache& cache() const { return cache_; }
  const LlamaModel& model() const { return model_; }
  // The kernel threads, for work between passes on the same thread that
  // calls forward() (the engine samples the logits rows with them).
  ThreadPool& pool() { return *pool_; }

 private:
  BatchForward(const LlamaModel& model, KvCache& cache, std::unique_ptr<ThreadPool> own, ThreadPool* borrowed,
               int32_t n_ctx);
  void validate(std::span<const SeqRun> runs) const;
  // Everything of forward() before the output: the batch's final residual
  // stream in act_->x.
  void run_batch(std::span<const SeqRun> runs);
  // Every layer for the batch tokens r, products and attention on `pool`.
  void run_layers(TokenRange r, std::span<const SeqRun> runs, ThreadPool& pool);
  // The attention step of forward_layer for tokens r: k, v, q, out at row r.begin.
  // The block table `layer` reads in `run`'s sequence: the windowed one for
  // the windowed layers of a split cache.
  std::span<const int32_t> table(const SeqRun& run, int32_t layer) const;
  void write_kv(int32_t layer, std::span<const SeqRun> runs, TokenRange r, const float* k, const float* v);
  // Rows per prefill attention task (attention_by_tile): 64 reads of each
  // K/V chunk from L1 instead of 64 from memory, states that stay in L2.
  static constexpr int32_t kTileRows = 64;
  // Up to kTileRows / group consecutive batch tokens of one run.
  struct AttnTile {
    int64_t begin, end;
  };
  // Tokens r cut into tiles (the same for every layer of a batch).
  std::vector<AttnTile> attention_tiles(TokenRange r) const;
  void attention(int32_t layer, std::span<const SeqRun> runs, TokenRange r, std::span<const AttnTile> tiles,
                 const float* q, float* out, ThreadPool& pool);
  // attention() by `tiles` times the query heads of each KV head; false
  // (nothing done) when that gives too few tasks for the pool.
  bool attention_by_tile(int32_t layer, std::span<const SeqRun> runs, TokenRange r, std::span<const AttnTile> tiles,
                         const float* q, float* out, ThreadPool& pool);
  // Where `layer`'s K/V of KV head kv_head sit for `run`'s sequence.
  PagedKv paged_kv(int32_t layer, const SeqRun& run, int32_t kv_head) const;
  // fn(begin, end) over n_tasks attention tasks of tokens r: on the pool,
  // stealing, or on this thread when the step is too small to wake it.
  template <class Fn>
  void run_attention_tasks(TokenRange r, int64_t n_tasks, Fn& fn, ThreadPool& pool) const;

  const LlamaModel& model_;
  KvCache& cache_;
  std::unique_ptr<ThreadPool> own_pool_;  // null when the pool is borrowed
  ThreadPool* pool_ = nullptr;
  // Size 1: runs every call on the calling thread and touches no state, so
  // both kernel threads may use it at once (split_by_token).
  std::unique_ptr<ThreadPool> serial_;
  bool small_layers_ = false;  // a layer's weights fit in 512 KiB (splits_by_token)
  int32_t heads_per_task_ = 1;  // query heads per attention kernel call: 1, 8 or 16
  bool attention_tiles_ = true;  // attention_by_tile() when it applies (NEXUS_ATTENTION)
  const float* rope_factors_ = nullptr;  // per-frequency RoPE divisors for this context, or null
  std::unique_ptr<Activations> act_;
  std::vector<int32_t> tokens_, pos_, run_of_, rows_;  // per batch token (rows_: per logits row)
  std::vector<float> logits_;
  std::vector<float> hidden_;  // hidden_states()' result
  std::vector<float> rope_cs_;      // [n_tokens, n_rot]: RoPE angles of each batch token
  std::vector<float> rope_cs_swa_;  // the same at the windowed layers' base, when it differs
};

}  // namespace nexus
