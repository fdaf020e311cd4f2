// Scheduler: decides, for each engine step, which sequences run and how many
// of their tokens, and owns their KV blocks' allocation (through the
// BlockManager). It never touches the model: the engine runs the plan.
//
// Every sequence has `tokens` (prompt + generated so far) of which the first
// n_computed have K/V in the cache; the next token can be sampled once all
// are computed. So a decoding sequence has one token pending, a prefilling
// one many: both are "runs" of pending tokens, and one step's batch is
// a run per scheduled sequence, at most max_batch_tokens tokens in all
// (chunked prefill: a long prompt advances in chunks while the others keep
// decoding; Agrawal et al. 2023, "Sarathi").
//
// Policy, per step, over running and waiting sequences in this order:
//   rank, highest first (the priority, or kAgedRank once aged: below); at
//   equal rank running before waiting; running ones least recently
//   scheduled first (round robin when the budget is smaller than the number
//   of streams); waiting ones in arrival order.
//   - A running sequence gets min(pending, budget left) tokens. When the pool
//     has no block for them, the lowest-ranked, most recently started
//     sequence not yet scheduled in this step is preempted (vLLM's recompute
//     preemption: its blocks are released and it waits again; on resumption
//     it re-prefills prompt + generated tokens, mostly from the prefix cache).
//     That victim may be the sequence itself.
//   - A running sequence's draft (SchedSeq::n_draft) rides along only when
//     the budget and the free blocks take the whole run (no reclaim, no
//     preemption for it); otherwise it is dropped for this step.
//   - A waiting sequence is admitted when fewer than max_seqs run and the
//     pool has blocks for ALL its pending tokens (after a prefix-cache
//     match; the windowed layers' pool, for the chunk of this step only:
//     later chunks reuse the windowed blocks that slide out), preempting
//     strictly lower-ranked sequences if that makes it fit; otherwise
//     admission stops for this step (no overtaking, so a big request is not
//     starved by small ones behind it).
// A sequence preempted in a step is not readmitted in the same step.
// A step that prefills (a chunk of more than one token, or a sequence's
// first token) at some rank runs nothing of lower rank: an interactive
// prompt then waits for one step of batch decodes at most, not for a step
// inflated by them (lower-priority streams skip that step).
// Before preempting anyone for blocks, the scheduler asks the engine to
// release a kept session (set_reclaim): idle sessions go before live work.
// A sequence that continues a kept session (resume_kv) adopts its blocks at
// admission instead of looking up the prefix cache.
//
// Aging bounds every wait. By priority alone, a flood of higher-priority
// requests holds a lower one back for as long as it lasts (40 streams at
// priority 1000 kept a default request waiting 18 s). So a waiting sequence
// whose wait (since its submission or its last preemption: waiting_since)
// reaches kMaxWait = 2 s is aged: from that plan on it ranks kAgedRank,
// above every priority, until it finishes. It is admitted in that plan,
// preempting non-aged sequences for a slot or blocks; aged sequences keep
// the order above among themselves (waiting: oldest first), and an equal
// rank never preempts. The bound: a sequence is admitted at most kMaxWait
// plus one step after it began waiting, whatever the priorities and the
// number of requests around it -- unless aged sequences fill the max_seqs
// slots (or the pool): then it is the next aged one, first come first
// served. Priorities order the first 2 s of a wait; arrival the rest. The
// rule is Linux's deadline I/O scheduler's (block/mq-deadline.c: sorted
// order, unless a request has waited past its expiry time) over vLLM's
// priority scheduling (priority, then arrival; lowest priority preempted
// first).
// No thrash: being aged is kept while running and across a preemption, and
// aged sequences are scheduled before anyone looks for a victim, so only
// non-aged ones are ever preempted for an aged one and none preempts it
// back. A victim's wait restarts at its preemption: it ages kMaxWait later,
// not at once (a long-running sequence, preempted, would otherwise come
// back aged and preempt another in turn, in a chain).
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/block_manager.h"

namespace nexus {

// Above every priority (engine.h's are in [-1000, 1000]): an aged sequence's rank.
inline constexpr int32_t kAgedRank = INT32_MAX;

// The scheduler's view of a sequence (engine/sequence.h extends it).
struct SchedSeq {
  int32_t priority = 0;
  uint64_t arrival = 0;        // submission order; unique
  // When it last began waiting (submitted, or preempted); set by the caller
  // before add(), by preemption after.
  std::chrono::steady_clock::time_point waiting_since{};
  bool aged = false;           // waited kMaxWait once: ranks kAgedRank until it finishes
  uint64_t started = 0;        // admission order of the current residency; 0 while waiting
  uint64_t last_step = 0;      // step that last scheduled (or preempted) it
  BlockManager::SeqId kv = 0;  // 0 while it holds no blocks
  BlockManager::SeqId resume_kv = 0;  // blocks of a kept session, adopted at admission
  std::vector<int32_t> tokens; // prompt + generated; all must be computed before the next sample
  int32_t n_computed = 0;      // tokens whose K/V are in the cache
  int32_t n_cached_first = -1; // prefix-cache hit at the first admission; -1 before it
  int32_t n_preempted = 0;
  // Speculative decoding: the last n_draft tokens of `tokens` are proposals
  // to verify in the next step (after the one pending real token). The
  // scheduler drops them (drop_draft) when the step cannot take the whole
  // run (budget, free blocks) or the sequence is preempted: a draft never
  // splits into chunks and never costs anyone their blocks.
  int32_t n_draft = 0;
  bool skip_prefix_cache = false;  // never matched in the prefix cache (its prompt needs every position computed)

  bool running() const { return kv != 0; }
  int32_t rank() const { return aged ? kAgedRank : priority; }
  int32_t pending() const { return static_cast<int32_t>(tokens.size()) - n_computed; }
  void drop_draft() {
    tokens.resize(tokens.size() - static_cast<size_t>(n_draft));
    n_draft = 0;
  }
};

struct ScheduledRun {
  SchedSeq* seq = nullptr;
  int32_t n_past = 0;     // the run's tokens are tokens[n_past, n_past + n_tokens)
  int32_t n_tokens = 0;
  bool completes = false; // reaches the end of tokens: its logits choose the next token
  int32_t n_draft = 0;    // of n_tokens, the last ones are proposals (then completes)
};

struct StepPlan {
  std::vector<ScheduledRun> runs;
  std::vector<SchedSeq*> admitted;   // admitted for the first time in this step
  std::vector<SchedSeq*> preempted;  // lost their blocks in this step
  int32_t n_tokens = 0;
  int32_t prefill_rank = INT32_MIN;  // highest rank that prefills in this step
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // The wait after which a sequence is aged (header comment).
  static constexpr std::chrono::milliseconds kMaxWait{2000};

  // Throws nexus::Error when max_seqs < 1 or max_batch_tokens < 1.
  Scheduler(BlockManager& blocks, int32_t max_seqs, int32_t max_batch_tokens);

  // A new sequence (tokens set, kv == 0): waits for admission.
  void add(SchedSeq* s);
  // Forgets a sequence (finished, cancelled or failed), releasing its blocks.
  void remove(SchedSeq* s);
  // Forgets a sequence but hands its blocks (kv, 0 when none) to the caller,
  // e.g. to keep a session's KV for its next turn.
  BlockManager::SeqId detach(SchedSeq* s);
  // `reclaim` releases one kept session's blocks and returns true, or
  // returns false when there is none.
  void set_reclaim(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }

  // Plans the next step at time `now` (waiting sequences age against it)
  // and allocates every run's blocks. The caller runs the forward pass over
  // plan.runs, then calls complete(plan).
  StepPlan plan(Clock::time_point now);
  // Marks the runs' tokens computed (n_computed advances; full blocks become
  // shareable through the prefix cache).
  void complete(const StepPlan& plan);

  const std::vector<SchedSeq*>& running() const { return running_; }
  const std::vector<SchedSeq*>& waiting() const { return waiting_; }
  int64_t preemptions() const { return preemptions_; }
  uint64_t steps() const { return step_; }

 private:
  void age_waiting();
  bool schedule_running(SchedSeq* s, int32_t& budget, StepPlan& plan);
  bool admit(SchedSeq* s, int32_t& budget, StepPlan& plan);
  // Lowest-ranked, most recently started running sequence not scheduled in
  // this step, with rank < below (or any when below is unset).
  SchedSeq* victim(int64_t below) const;
  void preempt(SchedSeq* v, StepPlan& plan);
  void push_run(SchedSeq* s, int32_t n, int32_t& budget, StepPlan& plan);

  bool make_room(SchedSeq* s, int32_t n, int32_t n_now, int64_t below, StepPlan& plan);

  BlockManager& blocks_;
  std::function<bool()> reclaim_;
  int32_t max_seqs_, max_batch_tokens_;
  std::vector<SchedSeq*> running_, waiting_, order_;
  uint64_t step_ = 0, n_started_ = 0;
  Clock::time_point now_{};  // of the plan being made
  int64_t preemptions_ = 0;
};

}  // namespace nexus
