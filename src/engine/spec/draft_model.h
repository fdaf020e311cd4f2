// A draft model (Leviathan et al. 2023, "Fast Inference from Transformers via
// Speculative Decoding"; Chen et al. 2023): a small model with the target's
// vocabulary proposes each speculating sequence's next k tokens, greedily
// (its argmax at each position: a point mass, so the engine's acceptance
// rule stays exact; docs/speculative.md).
//
// The draft keeps its own paged KV (its own KvCache and BlockManager, with
// prefix caching, sized for --spec-max-seqs full contexts), one draft
// sequence per engine sequence that has proposed. Before proposing, a
// sequence's draft KV is cut to the longest prefix its tokens still start
// with (rejected draft tokens go; BlockManager::truncate) and catches up on
// the rest (the prompt, the tokens the target emitted), the pending token
// last. Then k passes, each batched across every proposing sequence (one
// BatchForward::forward per pass, on the target's kernel threads): pass 1
// runs the catch-up chunks and yields d1, pass j runs d_(j-1) and yields d_j.
// The catch-up of one step is at most max_batch_tokens tokens in all; a
// sequence with more to catch up advances by a chunk and proposes nothing
// in that step.
//
// Every pass is timed (its wall time, by its tokens: pass_cost()), so the
// engine weighs the draft's own cost against what its tokens save, apart
// from its own step's cost (docs/speculative.md "Adaptive"). The constructor
// warms the draft up (warm_up): one pass of max_seqs sequences of up to 32
// tokens pages its weights in and grows its buffers, then that pass again,
// a proposing pass of one sequence and one of max_seqs are timed (the
// fastest of 5 runs each), so the draft's cost (of proposing and of catching up) is measured before the
// first request. A fresh engine that learnt it by trying the draft ran 4
// streams at 0.44-0.46x over their first 48 tokens, with a draft 3.5 times
// as slow as the model. Every later pass counts too, the first of each size
// included: the one-off costs are paid (a catch-up larger than the warm-up
// still grows the buffers: one sample of that size is then high).
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/kv_pool_sizes.h"
#include "engine/spec/step_cost.h"
#include "model/batch_forward.h"
#include "model/kv_cache.h"

namespace nexus {

class LlamaModel;
class ThreadPool;
class Tokenizer;

namespace spec {

// Throws nexus::Error naming the first difference between the two
// vocabularies: their sizes, a token's text (with its id), the BOS or the
// EOS id. `nexus serve --draft-model` refuses such a draft.
void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft);

class DraftModel {
 public:
  // One sequence to propose for.
  struct Request {
    uint64_t seq = 0;                  // the engine's id of the sequence (stable while it lives)
    std::span<const int32_t> tokens;   // its tokens, the pending (not yet computed) one last
    int32_t k = 0;                     // most tokens to propose
    std::vector<int32_t>* out = nullptr;  // cleared, then the proposal (maybe empty)
  };

  // `model` and `pool` must outlive this object. max_seqs: sequences whose
  // draft KV fits at once (more are evicted least recently used first);
  // n_ctx: the engine's context per sequence (the draft proposes only below
  // min(n_ctx, its own training context)); max_batch_tokens: catch-up
  // tokens per step. Throws nexus::Error when the KV budget holds no block.
  DraftModel(const LlamaModel& model, ThreadPool& pool, KvType kv_type, int32_t max_seqs, int32_t n_ctx,
             int32_t max_batch_tokens);
  ~DraftModel();
  DraftModel(const DraftModel&) = delete;
  DraftModel& operator=(const DraftModel&) = delete;

  // Proposes for every request, in k batched passes at most (above). A
  // request gets nothing when its context or the draft's pool has no room, or
  // while it catches up. Throws what BatchForward throws (a bug); the draft
  // KV of the requests is then released.
  void propose(std::span<Request> reqs);
  // Frees the draft KV of `seq` (it ended, was cancelled or preempted);
  // unknown ids are ignored.
  void release(uint64_t seq);

  // Seconds per draft pass by its tokens (every request's in the pass).
  const StepCost& pass_cost() const { return pass_cost_; }
  // What a sequence's proposed token costs when `others` sequences already
  // propose in the same passes: what it adds to each pass, pass(others + 1)
  // - pass(others) -- the first pays a whole pass of its own --; and what a
  // token it catches up on adds (read over 16 tokens). Unknown until a pass
  // has been measured (never, after the constructor). Charging the first
  // sequence the whole pass matters: with 4 running, requests arriving
  // apart often had one sequence proposing alone, and a cost shared by 4
  // made a d256 llama's Q4_0 draft look cheap enough to run at 0.74-0.88x.
  ProposerCost token_cost(int32_t others) const;
  // How many of `tokens` (a request's, the pending one last) the draft would
  // run before proposing for `seq`: those after the longest prefix its KV
  // holds (all of them for a sequence it has not seen).
  int32_t behind(uint64_t seq, std::span<const int32_t> tokens) const;

  const BlockManager& blocks() const { return blocks_; }
  const KvCache& cache() const { return cache_; }
  int32_t n_ctx() const { return n_ctx_; }

 private:
  struct Entry {
    BlockManager::SeqId kv = 0;
    uint64_t last_use = 0;  // the propose() call that last used it
  };
  struct Live {  // a request inside propose()
    Request* req;
    BlockManager::SeqId kv;
    int32_t n_past;             // positions already in the draft KV
    std::span<const int32_t> run;  // this pass's tokens
    int32_t k;                  // tokens to propose (0: catching up only)
  };
  DraftModel(const LlamaModel& model, ThreadPool& pool, KvType kv_type, int32_t n_ctx, int32_t max_batch_tokens,
             KvPoolSizes sizes);
  // The draft sequence of `seq`, created (and matched in the prefix cache
  // against `tokens`) on first use; marked used in this call.
  BlockManager::SeqId entry(uint64_t seq, std::span<const int32_t> tokens);
  // Appends `tokens` to kv, evicting sequences not used in this call when
  // the pool is full. False when that is not enough.
  bool append(BlockManager::SeqId kv, std::span<const int32_t> tokens);
  bool evict_one();
  // The passes above, on sequences of token 0 (released after, nothing
  // committed, so nothing cached).
  void warm_up(int32_t max_seqs);

  const LlamaModel& model_;
  const int32_t max_batch_tokens_;
  KvCache cache_;
  BlockManager blocks_;
  const int32_t n_ctx_;  // positions the draft proposes below
  BatchForward forward_;
  std::unordered_map<uint64_t, Entry> seqs_;
  uint64_t n_calls_ = 0;
  StepCost pass_cost_{/*count_first=*/true};
  std::vector<Live> live_;
  std::vector<SeqRun> runs_;
};

}  // namespace spec
}  // namespace nexus
