// The engine's speculative decoding before and after each step
// (docs/speculative.md; engine.h SpecOptions): which running sequence
// proposes what, from which source and how many tokens (the prediction, the
// draft model in one batched call, n-gram lookup; adaptive: Sequence::
// draft_length over the measured step costs), and the measurements that
// choice rests on: step costs by size (spec::StepCosts), the draft model's
// own passes (spec::DraftModel::pass_cost) and the outcome check
// (spec::DraftVeto). The verify runs themselves (sampling, acceptance,
// truncating rejected K/V) stay in the engine's step.
//
// Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/spec/draft_model.h"
#include "engine/spec/draft_veto.h"
#include "engine/spec/step_cost.h"

namespace nexus {

class SchedSeq;
class Sequence;
enum class DraftSource : uint8_t;

class Speculator {
 public:
  // `draft`: the draft model (SpecOptions::draft_model), or null.
  Speculator(const SpecOptions& opts, int32_t n_ctx, std::unique_ptr<spec::DraftModel> draft);

  // Before a step: sets the drafts of the running sequences that are about
  // to decode (none with more than opts.max_seqs running: theirs are
  // dropped). Sequences the draft model failed for (a bug in it, not
  // input) are appended to `failed` with nothing proposed; the caller fails
  // and retires them. Returns the seconds the draft model's passes took.
  double propose(const std::vector<SchedSeq*>& running, std::vector<Sequence*>& failed);

  // After a step of n_runs runs and n_tokens tokens that took total_s
  // seconds, draft_s of them the draft model's (propose's return): records
  // its cost, and, for a step of decodes and verify runs only
  // (decodes_only), its emitted tokens for the outcome check.
  void record_step(int32_t n_runs, int32_t n_tokens, double total_s, double draft_s, bool verifies,
                   bool decodes_only, int32_t emitted);

  // Frees the draft model's KV of a sequence (ended or preempted).
  void release(uint64_t seq) {
    if (draft_) draft_->release(seq);
  }
  const spec::DraftModel* draft() const { return draft_.get(); }

 private:
  // The draft length to ask `source` for (SpecOptions::adaptive).
  int32_t draft_length(Sequence* s, DraftSource source, int32_t room, int32_t n_running);

  const SpecOptions opts_;
  const int32_t n_ctx_;
  std::unique_ptr<spec::DraftModel> draft_;
  spec::StepCosts step_cost_;  // step seconds by step size, the draft model's passes left out
  spec::DraftVeto veto_;       // the draft model's realized rate against plain steps
  spec::LoadPeak load_;        // the running count the draft model is judged at
  // propose()'s scratch: the sequences the draft model proposes for.
  std::vector<spec::DraftModel::Request> reqs_;
  std::vector<Sequence*> seqs_;
  std::vector<int32_t> k_;
  std::vector<std::vector<int32_t>> out_;
};

}  // namespace nexus
