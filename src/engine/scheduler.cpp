#include "engine/scheduler.h"

#include <algorithm>
#include <limits>
#include <string>

#include "util/error.h"

namespace nexus {
namespace {

void erase_one(std::vector<SchedSeq*>& v, SchedSeq* s) {
  auto it = std::find(v.begin(), v.end(), s);
  if (it != v.end()) v.erase(it);
}

// The step order of the header: rank, running first, then round robin
// (running) or arrival (waiting).
bool goes_first(const SchedSeq* a, const SchedSeq* b) {
  if (a->rank() != b->rank()) return a->rank() > b->rank();
  if (a->running() != b->running()) return a->running();
  if (a->running()) {
    if (a->last_step != b->last_step) return a->last_step < b->last_step;
    return a->started < b->started;
  }
  return a->arrival < b->arrival;
}

}  // namespace

Scheduler::Scheduler(BlockManager& blocks, int32_t max_seqs, int32_t max_batch_tokens)
    : blocks_(blocks), max_seqs_(max_seqs), max_batch_tokens_(max_batch_tokens) {
  if (max_seqs < 1) throw Error("scheduler: max_seqs must be at least 1, got " + std::to_string(max_seqs));
  if (max_batch_tokens < 1)
    throw Error("scheduler: max_batch_tokens must be at least 1, got " + std::to_string(max_batch_tokens));
}

void Scheduler::add(SchedSeq* s) {
  if (s->running() || s->tokens.empty()) throw Error("scheduler: a new sequence needs tokens and no blocks");
  waiting_.push_back(s);
}

void Scheduler::remove(SchedSeq* s) {
  if (const BlockManager::SeqId kv = detach(s)) blocks_.release(kv);
}

BlockManager::SeqId Scheduler::detach(SchedSeq* s) {
  if (s->resume_kv) {
    blocks_.release(s->resume_kv);
    s->resume_kv = 0;
  }
  const BlockManager::SeqId kv = s->kv;
  s->kv = 0;
  if (kv) erase_one(running_, s);
  else erase_one(waiting_, s);
  return kv;
}

StepPlan Scheduler::plan(Clock::time_point now) {
  ++step_;
  now_ = now;
  age_waiting();
  StepPlan plan;
  int32_t budget = max_batch_tokens_;
  order_.assign(running_.begin(), running_.end());
  order_.insert(order_.end(), waiting_.begin(), waiting_.end());
  std::stable_sort(order_.begin(), order_.end(), goes_first);
  for (SchedSeq* s : order_) {
    if (budget == 0) break;
    if (s->last_step == step_) continue;  // preempted earlier in this step
    // A step that prefills some rank carries nothing of lower rank: their
    // tokens would only lengthen it (and the waiting prompt's TTFT).
    if (!plan.runs.empty() && s->rank() < plan.prefill_rank) break;
    if (s->running()) {
      schedule_running(s, budget, plan);
    } else if (!admit(s, budget, plan)) {
      break;  // no overtaking in the waiting line
    }
  }
  return plan;
}

void Scheduler::age_waiting() {
  for (SchedSeq* s : waiting_)
    if (!s->aged && now_ - s->waiting_since >= kMaxWait) s->aged = true;
}

// Frees blocks until `s` can append n tokens, n_now of them in this step
// (BlockManager::can_append): kept sessions first, then victims with
// rank < below. False when s cannot get them (s itself may have been the
// victim).
bool Scheduler::make_room(SchedSeq* s, int32_t n, int32_t n_now, int64_t below, StepPlan& plan) {
  while (!blocks_.can_append(s->kv, n, n_now)) {
    if (reclaim_ && reclaim_()) continue;
    SchedSeq* v = victim(below);
    if (v == nullptr) return false;
    preempt(v, plan);
    if (v == s) return false;
  }
  return true;
}

bool Scheduler::schedule_running(SchedSeq* s, int32_t& budget, StepPlan& plan) {
  if (s->n_draft > 0 && (s->pending() > budget || !blocks_.can_append(s->kv, s->pending()))) s->drop_draft();
  const int32_t n = std::min(s->pending(), budget);
  if (!make_room(s, n, n, std::numeric_limits<int64_t>::max(), plan)) return false;
  push_run(s, n, budget, plan);
  return true;
}

bool Scheduler::admit(SchedSeq* s, int32_t& budget, StepPlan& plan) {
  while (static_cast<int32_t>(running_.size()) >= max_seqs_) {
    SchedSeq* v = victim(s->rank());
    if (v == nullptr) return false;
    preempt(v, plan);
  }
  if (s->n_draft > 0) s->drop_draft();  // drafts are for running sequences only
  int32_t matched = 0;
  const bool resumed = s->resume_kv != 0;
  if (resumed) {  // a kept session: its blocks hold the tokens' beginning
    s->kv = s->resume_kv;
    s->resume_kv = 0;
    matched = blocks_.n_tokens(s->kv);
  } else {
    s->kv = blocks_.create();
    matched = s->skip_prefix_cache ? 0 : blocks_.match_prefix(s->kv, s->tokens);
  }
  s->n_computed = matched;
  if (!make_room(s, s->pending(), std::min(s->pending(), budget), s->rank(), plan)) {
    // A session keeps its blocks while it waits; a prefix match is cheap to redo.
    if (resumed) s->resume_kv = s->kv;
    else blocks_.release(s->kv);
    s->kv = 0;
    s->n_computed = 0;
    return false;
  }
  erase_one(waiting_, s);
  running_.push_back(s);
  s->started = ++n_started_;
  if (s->n_cached_first < 0) {
    s->n_cached_first = matched;
    plan.admitted.push_back(s);
  }
  push_run(s, std::min(s->pending(), budget), budget, plan);
  return true;
}

SchedSeq* Scheduler::victim(int64_t below) const {
  SchedSeq* v = nullptr;
  for (SchedSeq* r : running_) {
    if (r->last_step == step_ || r->rank() >= below) continue;
    if (v == nullptr || r->rank() < v->rank() || (r->rank() == v->rank() && r->started > v->started)) v = r;
  }
  return v;
}

void Scheduler::preempt(SchedSeq* v, StepPlan& plan) {
  if (v->n_draft > 0) v->drop_draft();
  blocks_.release(v->kv);
  v->kv = 0;
  v->n_computed = 0;
  v->started = 0;
  v->last_step = step_;
  v->waiting_since = now_;  // its wait starts again (header: no chain of aged preemptions)
  ++v->n_preempted;
  ++preemptions_;
  erase_one(running_, v);
  waiting_.push_back(v);
  plan.preempted.push_back(v);
}

void Scheduler::push_run(SchedSeq* s, int32_t n, int32_t& budget, StepPlan& plan) {
  const auto first = s->tokens.begin() + s->n_computed;
  if (!blocks_.append(s->kv, std::span<const int32_t>(&*first, static_cast<size_t>(n))))
    throw Error("scheduler: block allocation failed after the check");  // a bug, not load
  const bool completes = n == s->pending();
  const int32_t n_draft = completes ? s->n_draft : 0;  // schedule_running dropped a draft that does not fit
  plan.runs.push_back({s, s->n_computed, n, completes, n_draft});
  // A verify run (one real token + a draft) is a decode, not a prefill.
  if (n - n_draft > 1 || s->n_computed == 0) plan.prefill_rank = std::max(plan.prefill_rank, s->rank());
  plan.n_tokens += n;
  budget -= n;
  s->last_step = step_;
}

void Scheduler::complete(const StepPlan& plan) {
  for (const ScheduledRun& r : plan.runs) {
    r.seq->n_computed += r.n_tokens;
    blocks_.commit(r.seq->kv);
  }
}

}  // namespace nexus
