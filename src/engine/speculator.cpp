#include "engine/speculator.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "engine/sequence.h"

namespace nexus {

Speculator::Speculator(const SpecOptions& opts, int32_t n_ctx, std::unique_ptr<spec::DraftModel> draft)
    : opts_(opts), n_ctx_(n_ctx), draft_(std::move(draft)) {}

// The first proposer that proposes wins: the prediction, the draft model
// (one batched call for every sequence it proposes for), n-gram lookup.
int32_t Speculator::draft_length(Sequence* s, DraftSource source, int32_t room, int32_t n_running) {
  if (!opts_.adaptive) return room;
  // The draft model's passes are their own cost, shared with the sequences
  // that chose the draft before this one in this step; the other sources'
  // is a lookup inside the step.
  spec::ProposerCost own;
  if (source == DraftSource::Draft) {
    own = draft_->token_cost(static_cast<int32_t>(seqs_.size()));
    // Its catch-up on the tokens the draft has not seen (beyond the pending
    // one), spread over the steps it may serve: at most kCatchUpSteps, so a
    // draft that stays in use briefly (another request arrives, and with 2
    // running it no longer pays) is not started far behind.
    constexpr int32_t kCatchUpSteps = 16;
    const int32_t behind = draft_->behind(s->arrival, s->tokens) - 1;
    own.setup_s = std::max(behind, 0) * own.catch_up_s / std::clamp(s->tokens_left(), 1, kCatchUpSteps);
  }
  return s->draft_length(source, room, n_running, step_cost_, own);
}

double Speculator::propose(const std::vector<SchedSeq*>& running, std::vector<Sequence*>& failed) {
  const int32_t n_running = static_cast<int32_t>(running.size());
  const bool busy = n_running > opts_.max_seqs;
  const int32_t load = load_.step(n_running);
  // The draft model is judged at the most sequences that ran lately
  // (spec::LoadPeak), and used unless its steps emitted fewer tokens per
  // second than plain ones at that count (spec::DraftVeto).
  const bool use_draft = draft_ && !busy && !(opts_.adaptive && veto_.vetoed(load));
  seqs_.clear();
  k_.clear();
  for (SchedSeq* r : running) {
    auto* s = static_cast<Sequence*>(r);
    if (busy) {
      if (s->n_draft > 0) s->drop_draft();
      continue;
    }
    // Each source in turn, asked for the length its measured acceptance
    // makes pay at this step's size: the prediction, the draft model, n-grams.
    const int32_t room = s->draft_room(opts_, n_ctx_);
    if (room < 1) continue;
    if (const int32_t k = draft_length(s, DraftSource::Prediction, room, n_running);
        k > 0 && s->propose(DraftSource::Prediction, opts_, k) > 0)
      continue;
    if (use_draft) {
      if (const int32_t k = draft_length(s, DraftSource::Draft, room, load); k > 0) {
        seqs_.push_back(s);
        k_.push_back(k);
        continue;
      }
    }
    if (opts_.proposer == SpecProposer::Ngram) {
      // Where lookup's drafts do not pay, its guess is checked anyway (one
      // lookup either way; a lookup that finds nothing has nothing to check).
      if (const int32_t k = draft_length(s, DraftSource::Ngram, room, n_running); k > 0)
        s->propose(DraftSource::Ngram, opts_, k);
      else
        s->shadow_ngram(opts_);
    }
  }
  if (seqs_.empty()) return 0;
  reqs_.clear();
  if (out_.size() < seqs_.size()) out_.resize(seqs_.size());
  for (size_t i = 0; i < seqs_.size(); ++i) reqs_.push_back({seqs_[i]->arrival, seqs_[i]->tokens, k_[i], &out_[i]});
  const auto start = std::chrono::steady_clock::now();
  try {
    draft_->propose(reqs_);
  } catch (const std::exception& e) {
    // Validation failed (a bug, not input): as in the target's forward pass.
    for (Sequence* s : seqs_) {
      s->fail(std::string("internal error in the draft model: ") + e.what());
      failed.push_back(s);
    }
    return 0;
  }
  const double draft_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A sequence the draft model has nothing for (no room, catching up) may
  // still find an n-gram.
  for (size_t i = 0; i < seqs_.size(); ++i) {
    Sequence* s = seqs_[i];
    if (s->set_draft(DraftSource::Draft, out_[i]) == 0 && opts_.proposer == SpecProposer::Ngram)
      s->propose(DraftSource::Ngram, opts_, draft_length(s, DraftSource::Ngram, k_[i], n_running));
  }
  return draft_s;
}

void Speculator::record_step(int32_t n_runs, int32_t n_tokens, double total_s, double draft_s, bool verifies,
                             bool decodes_only, int32_t emitted) {
  step_cost_.record(n_runs, n_tokens, total_s - draft_s, verifies);
  if (draft_ && decodes_only && (draft_s > 0 || !verifies)) veto_.record(n_runs, draft_s > 0, emitted, total_s);
}

}  // namespace nexus
