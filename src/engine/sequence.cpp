#include "engine/sequence.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "engine/engine_metrics.h"
#include "engine/spec/ngram.h"
#include "util/error.h"

namespace nexus {
namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

void validate_request(const GenerationRequest& req, int32_t n_ctx, int32_t n_vocab) {
  if (req.prompt.empty()) throw Error("the prompt is empty (it needs at least one token)");
  if (static_cast<int64_t>(req.prompt.size()) >= n_ctx)
    throw Error(fmt::format("the prompt has {} tokens but the context holds {} (prompt + 1 generated token must fit)",
                            req.prompt.size(), n_ctx));
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    const int32_t id = req.prompt[i];
    if (id < 0 || id >= n_vocab)
      throw Error(fmt::format("prompt token {} at position {} is outside the vocabulary [0, {})", id, i, n_vocab));
  }
  if (req.stop.max_tokens < 0) throw Error(fmt::format("max_tokens must not be negative (got {})", req.stop.max_tokens));
  if (req.priority < kPriorityMin || req.priority > kPriorityMax)
    throw Error(fmt::format("priority must be in [{}, {}] (got {})", kPriorityMin, kPriorityMax, req.priority));
  Sampler::validate(req.sampling);
  for (size_t i = 0; i < req.prediction.size(); ++i) {
    const int32_t id = req.prediction[i];
    if (id < 0 || id >= n_vocab)
      throw Error(fmt::format("prediction token {} at position {} is outside the vocabulary [0, {})", id, i, n_vocab));
  }
}

Sequence::Sequence(GenerationJob job, const Tokenizer& tok, int32_t n_vocab, uint64_t arrival,
                   EngineMetrics* metrics, std::shared_ptr<grammar::Automaton> grammar)
    : job_(std::move(job)), tok_(tok), metrics_(metrics), sampler_(job_.req.sampling, n_vocab), decoder_(tok), stop_(job_.req.stop.stop) {
  if (job_.req.grammar) {
    if (!grammar) throw Error("engine: a grammar request needs its automaton");
    grammar_ = std::make_unique<grammar::Matcher>(std::move(grammar));
  }
  priority = job_.req.priority;
  this->arrival = arrival;
  waiting_since = job_.submitted;  // the client's wait counts from its submission (scheduler.h, Aging)
  tokens = job_.req.prompt;
  tokens.reserve(tokens.size() + static_cast<size_t>(job_.req.stop.max_tokens) + 1);
  usage_.prompt_tokens = static_cast<int32_t>(job_.req.prompt.size());
  if (!job_.req.prediction.empty()) {
    prediction_.emplace(job_.req.prediction);
    usage_.rejected_prediction_tokens = prediction_->rejected();
  }
  skip_prefix_cache = job_.req.prompt_logprobs;
  if (job_.req.prompt_logprobs) {
    prompt_lp_.resize(job_.req.prompt.size());
    for (size_t i = 0; i < prompt_lp_.size(); ++i) {
      prompt_lp_[i].id = job_.req.prompt[i];
      if (prompt_lp_[i].id < tok_.n_vocab()) prompt_lp_[i].piece = tok_.token_to_piece(prompt_lp_[i].id, true);
    }
    prompt_lp_[0].logprob = std::numeric_limits<float>::quiet_NaN();
  }
}

void Sequence::on_prompt_logits(int32_t n_past, std::span<const float> rows, int32_t n_vocab) {
  const int32_t k = std::max(job_.req.sampling.logprobs, 0);
  const auto n_rows = static_cast<int32_t>(rows.size() / static_cast<size_t>(n_vocab));
  for (int32_t j = 0; j < n_rows; ++j) {
    const auto pos = static_cast<size_t>(n_past + j + 1);  // the token row j predicts
    if (pos >= prompt_lp_.size()) break;
    const Logprobs lp =
        token_logprobs(rows.subspan(static_cast<size_t>(j) * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab)),
                       prompt_lp_[pos].id, k);
    TokenLogprob& t = prompt_lp_[pos];
    t.logprob = lp.chosen.logprob;
    t.top.clear();
    for (const LogprobEntry& e : lp.top) {
      TokenLogprob a;
      a.id = e.id;
      a.logprob = e.logprob;
      if (e.id < tok_.n_vocab()) a.piece = tok_.token_to_piece(e.id, true);
      t.top.push_back(std::move(a));
    }
  }
}

void Sequence::attach_prompt_logprobs(GenerationEvent& ev) {
  if (prompt_lp_sent_ || prompt_lp_.empty()) return;
  prompt_lp_sent_ = true;
  ev.prompt_logprobs = prompt_lp_;
}

void Sequence::on_admitted(Clock::time_point now) {
  admitted_ = now;
  timings_.queue_s = seconds(job_.submitted, now);
  usage_.cached_tokens = std::max(n_cached_first, 0);
}

int32_t Sequence::sample(std::span<const float> logits, size_t n_history) {
  if (grammar_) logits = apply_grammar(logits);
  const int32_t id =
      sampler_.sample(logits, std::span<const int32_t>(tokens.data(), std::min(n_history, tokens.size())), penalized_);
  if (grammar_ && !tok_.is_eog(id) && !grammar_->accept(grammar_vocab_piece(id)))
    throw Error("grammar: the sampled token does not continue the grammar");  // the mask forbids it: a bug
  if (const int32_t k = job_.req.sampling.logprobs; k >= 0)
    logprobs_ = token_logprobs(sampler_.edits_logits() ? std::span<const float>(penalized_) : logits, id, k);
  return id;
}

bool Sequence::can_speculate() const { return !grammar_ && job_.req.sampling.logprobs < 0; }

int32_t Sequence::draft_room(const SpecOptions& opts, int32_t n_ctx) {
  if (n_draft != 0) return 0;  // not scheduled in the last step: still valid
  draft_source_ = DraftSource::None;
  if (pending() != 1 || !can_speculate()) return 0;
  ++steps_since_verify_;
  // The verify run emits up to k + 1 tokens: all within max_tokens; every
  // draft position below n_ctx.
  const int64_t room = std::min<int64_t>(job_.req.stop.max_tokens - n_generated_ - 1,
                                         static_cast<int64_t>(n_ctx) - static_cast<int64_t>(tokens.size()) - 1);
  return static_cast<int32_t>(std::max<int64_t>(0, std::min<int64_t>(opts.k, room)));
}

namespace {

// Prior pseudo-counts of the acceptance rate: a client's prediction is
// meant to be mostly right (3 of 4), and so is a draft model, chosen to
// agree with its model (at even odds, a random d256 llama drafting for its
// F32 original was never tried, though it accepts 0.6 and pays 1.2x);
// n-grams start at even odds.
constexpr double kPriorAccepted[3] = {3, 3, 1};  // Prediction, Draft, Ngram
constexpr double kPriorRejected[3] = {1, 1, 1};
constexpr double kDecay = 0.6;  // the weight of earlier verify runs, per run

}  // namespace

int32_t Sequence::draft_length(DraftSource source, int32_t room, int32_t n_running, const spec::StepCosts& cost,
                               spec::ProposerCost own) {
  if (source == DraftSource::None || room < 1) return 0;
  const size_t i = static_cast<size_t>(source) - 1;
  const Acceptance& a = acceptance_[i];
  const double q = (a.accepted + kPriorAccepted[i]) / (a.tried + kPriorAccepted[i] + kPriorRejected[i]);
  const int32_t k = spec::best_draft_length(q, n_running, room, cost, own);
  if (k > 0 || source == DraftSource::Ngram) return k;  // lookup's shadow measures it (shadow_ngram)
  // A one-token probe measures the acceptance again after probe_interval
  // steps; never when drafts always accepted would not pay either (a draft
  // model slower than the step).
  return steps_since_verify_ >= spec::probe_interval(n_running, cost, own) &&
                 spec::best_draft_length(1.0, n_running, room, cost, own) > 0
             ? 1
             : 0;
}

int32_t Sequence::propose(DraftSource source, const SpecOptions& opts, int32_t k) {
  if (n_draft != 0 || k < 1) return n_draft;
  proposal_.clear();
  if (source == DraftSource::Prediction && prediction_) prediction_->propose(k, proposal_);
  if (source == DraftSource::Ngram) spec::ngram_propose(tokens, opts.ngram, k, proposal_);
  return set_draft(source, proposal_);
}

int32_t Sequence::set_draft(DraftSource source, std::span<const int32_t> draft) {
  if (n_draft != 0 || draft.empty()) return n_draft;
  draft_source_ = source;
  shadow_token_ = -1;
  tokens.insert(tokens.end(), draft.begin(), draft.end());
  n_draft = static_cast<int32_t>(draft.size());
  return n_draft;
}

void Sequence::shadow_ngram(const SpecOptions& opts) {
  shadow_token_ = -1;
  if (n_draft != 0 || spec::ngram_propose(tokens, opts.ngram, 1, proposal_) == 0) return;
  shadow_token_ = proposal_[0];
  shadow_pos_ = tokens.size();
}

void Sequence::on_plain_token(int32_t id) {
  if (shadow_token_ < 0) return;
  if (shadow_pos_ == tokens.size()) {
    Acceptance& a = acceptance_[static_cast<size_t>(DraftSource::Ngram) - 1];
    a.accepted = kDecay * a.accepted + (id == shadow_token_ ? 1 : 0);
    a.tried = kDecay * a.tried + 1;
  }
  shadow_token_ = -1;
}

void Sequence::on_verified(int32_t proposed, int32_t accepted) {
  if (proposed <= 0 || draft_source_ == DraftSource::None) return;
  steps_since_verify_ = 0;
  Acceptance& a = acceptance_[static_cast<size_t>(draft_source_) - 1];
  a.accepted = kDecay * a.accepted + accepted;
  a.tried = kDecay * a.tried + accepted + (accepted < proposed ? 1 : 0);
}

// The logits with every token the grammar does not allow at -inf; an
// end-of-generation token stays only where the output is a complete
// sentence (and is all that stays once nothing else can follow). Done in
// place: the row is this sequence's in this step's logits (BatchForward's
// buffer, rows sampled in parallel are disjoint), and nothing reads it
// after sample(); a copy of the row (128 KB for 32k tokens) per token was a
// few percent of a small model's decode.
std::span<const float> Sequence::apply_grammar(std::span<const float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::vector<uint64_t>& allowed = grammar_->allowed_tokens();
  const bool done = grammar_->done(), can_end = grammar_->can_end();
  float* row = const_cast<float*>(logits.data());
  const size_t n = logits.size();
  eog_kept_.clear();
  if (can_end)
    for (int32_t id : tok_.eog_ids())
      if (id >= 0 && static_cast<size_t>(id) < n) eog_kept_.emplace_back(id, row[id]);
  bool any = false;
  // A word of the mask at a time: whole words (inside a string) stay, empty
  // words fill, only mixed ones go bit by bit.
  for (size_t w = 0; w * 64 < n; ++w) {
    const size_t lo = w * 64, hi = std::min(n, lo + 64);
    const uint64_t bits = done || w >= allowed.size() ? 0 : allowed[w];
    if (bits == ~uint64_t{0} && hi - lo == 64) {
      any = true;
      continue;
    }
    if (bits == 0) {
      std::fill(row + lo, row + hi, kNegInf);
      continue;
    }
    any = true;
    for (size_t id = lo; id < hi; ++id)
      if (!((bits >> (id - lo)) & 1)) row[id] = kNegInf;
  }
  for (const auto& [id, v] : eog_kept_) {
    row[id] = v;
    any = true;
  }
  if (!any) throw Error("grammar: no token of the vocabulary can continue the output here");
  return logits;
}

const std::string& Sequence::grammar_vocab_piece(int32_t id) const { return grammar_->vocab().piece(id); }

std::optional<TokenLogprob> Sequence::reported_logprob(int32_t id) const {
  if (job_.req.sampling.logprobs < 0 || logprobs_.chosen.id != id) return std::nullopt;
  auto entry = [&](const LogprobEntry& e) {
    TokenLogprob t;
    t.id = e.id;
    t.logprob = e.logprob;
    if (e.id < tok_.n_vocab()) t.piece = tok_.token_to_piece(e.id, true);
    return t;
  };
  TokenLogprob out = entry(logprobs_.chosen);
  for (const LogprobEntry& e : logprobs_.top) out.top.push_back(entry(e));
  return out;
}

bool Sequence::on_token(int32_t id, int32_t n_ctx, Clock::time_point now) {
  if (n_generated_++ == 0) {
    first_token_ = now;
    timings_.ttft_s = seconds(job_.submitted, now);
    timings_.prefill_s = seconds(admitted_, now);
  } else {
    last_itl_ = seconds(last_token_, now);
    if (metrics_) metrics_->observe_itl(last_itl_);
  }
  last_token_ = now;
  usage_.completion_tokens = n_generated_;
  tokens.push_back(id);
  if (prediction_) {
    const size_t n_prompt = job_.req.prompt.size();
    prediction_->on_token(std::span<const int32_t>(tokens.data() + n_prompt, tokens.size() - n_prompt));
    usage_.accepted_prediction_tokens = prediction_->accepted();
    usage_.rejected_prediction_tokens = prediction_->rejected();
  }
  // Prompt + output never exceed n_ctx: `id` fills the last position. (The
  // test was n_computed >= n_ctx, "no slot to evaluate id", which let one
  // token more out than the context holds.)
  const bool context_full = static_cast<int64_t>(tokens.size()) >= n_ctx;

  GenerationEvent ev;
  ev.token = id;
  std::optional<FinishReason> reason;
  bool hit_stop = false;
  const StopParams& sp = job_.req.stop;
  if (!sp.ignore_eos && tok_.is_eog(id)) {
    ev.text = flush_text(hit_stop);
    reason = FinishReason::Stop;
  } else {
    ev.logprob = reported_logprob(id);
    // A model vocabulary larger than the tokenizer's has ids without text.
    StopMatcher::Result r = stop_.feed(id < tok_.n_vocab() ? decoder_.push(id) : std::string());
    ev.text = std::move(r.text);
    if (r.stopped) {
      reason = FinishReason::Stop;
    } else if (n_generated_ >= sp.max_tokens || context_full) {
      ev.text += flush_text(hit_stop);
      reason = hit_stop ? FinishReason::Stop : FinishReason::Length;
    }
  }
  attach_prompt_logprobs(ev);
  if (reason) {
    deliver_final(ev, *reason);
    return true;
  }
  job_.on_event(ev);
  return false;
}

std::string Sequence::flush_text(bool& hit_stop) {
  StopMatcher::Result r = stop_.feed(decoder_.flush());
  if (r.stopped) {
    hit_stop = true;
    return std::move(r.text);
  }
  return r.text + stop_.flush();
}

void Sequence::deliver_final(GenerationEvent& ev, FinishReason reason) {
  ev.done = true;
  ev.finish = reason;
  if (reason == FinishReason::Stop && stop_.stopped()) ev.stop_sequence = stop_.which();
  const Clock::time_point now = Clock::now();
  if (n_generated_ > 0) timings_.decode_s = seconds(first_token_, last_token_);
  timings_.e2e_s = seconds(job_.submitted, now);
  if (n_cached_first < 0) timings_.queue_s = timings_.e2e_s;  // never admitted
  ev.usage = usage_;
  ev.timings = timings_;
  if (metrics_) metrics_->observe_request(request_record(ev, timings_.e2e_s, usage_.cached_tokens));
  final_sent_ = true;  // before the call: a throwing callback must not get a second final event
  job_.on_event(ev);
}

void Sequence::finish(FinishReason reason, const std::string& error, const std::string& error_code) noexcept {
  if (final_sent_) return;
  try {
    GenerationEvent ev;
    ev.error = error;
    ev.error_code = error_code;
    if (reason == FinishReason::Length) attach_prompt_logprobs(ev);  // max_tokens 0
    deliver_final(ev, reason);
  } catch (...) {
    // The callback threw on the final event: there is nothing more to tell it.
  }
}

}  // namespace nexus
