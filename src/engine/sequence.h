// Sequence: one request's generation state inside the engine -- what the
// scheduler sees (SchedSeq: tokens, blocks, priority) plus everything that
// turns logits into the client's events:
//   logits -> Sampler -> StreamDecoder (whole UTF-8 characters)
//          -> StopMatcher (stop strings withheld) -> GenerationEvent
// until an end-of-generation token (unless ignore_eos), max_tokens, a stop
// string, a full context ("length"), cancellation or an error. The sampler
// lives as long as the sequence, so a preempted and resumed sequence draws
// the same random numbers as an uninterrupted one. Internal to the engine;
// used on the engine thread only.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/spec/prediction.h"
#include "engine/spec/step_cost.h"
#include "grammar/matcher.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace nexus {

class EngineMetrics;

using Clock = std::chrono::steady_clock;

struct GenerationJob {
  GenerationRequest req;
  EventCallback on_event;
  std::shared_ptr<RequestHandle> handle;
  Clock::time_point submitted;
};

// Throws nexus::Error describing the first problem with the request.
void validate_request(const GenerationRequest& req, int32_t n_ctx, int32_t n_vocab);

// Where a sequence's current draft came from.
enum class DraftSource : uint8_t { None, Prediction, Draft, Ngram };

class Sequence : public SchedSeq {
 public:
  // `job` must have passed validate_request. `metrics` (may be null) gets
  // every inter-token gap and the final event's record.
  // `grammar` (the automaton of the request's grammar over the tokenizer's
  // pieces, maybe shared with other requests of the same grammar:
  // grammar/automaton_cache.h) must be given when the request has a grammar.
  Sequence(GenerationJob job, const Tokenizer& tok, int32_t n_vocab, uint64_t arrival, EngineMetrics* metrics,
           std::shared_ptr<grammar::Automaton> grammar = nullptr);

  bool cancelled() const { return job_.handle && job_.handle->cancelled(); }
  const std::shared_ptr<RequestHandle>& handle() const { return job_.handle; }
  uint64_t session() const { return job_.req.session; }
  bool finished() const { return final_sent_; }

  // The step that first admitted the sequence starts at `now`.
  void on_admitted(Clock::time_point now);

  // The next token from the logits of tokens.back() ([n_vocab]; copied into
  // a buffer of this sequence only when a penalty, a bias or a grammar
  // edits them). Touches only this sequence's sampler and grammar matcher,
  // so the engine samples several sequences on different threads at once.
  // Throws nexus::Error on a logits row of the wrong size, or when the
  // grammar allows no token of the vocabulary.
  int32_t sample(std::span<const float> logits) { return sample(logits, tokens.size()); }
  // The same with the penalties' history = tokens[0, n_history): the token
  // after tokens[n_history - 1], for a verify run's rows.
  int32_t sample(std::span<const float> logits, size_t n_history);

  // Speculative decoding (engine.h SpecOptions). Whether this request may
  // speculate at all (no grammar, no logprobs).
  bool can_speculate() const;
  // For a running sequence with one pending token and no draft: the most
  // tokens it may propose in this step, opts.k, never past max_tokens - 1
  // more tokens or position n_ctx - 1. 0 with a draft still pending (not
  // scheduled in the last step: still valid), or when the request may not
  // speculate.
  int32_t draft_room(const SpecOptions& opts, int32_t n_ctx);
  // How many of those `room` tokens to ask `source` for: the length that
  // makes the step fastest (spec::best_draft_length) given this sequence's
  // measured acceptance of that source's drafts, the measured step costs
  // with n_running sequences in the step and what the source itself costs
  // (`own`: a draft model's passes). 0: none pays. A sequence that has
  // not verified a draft for spec::probe_interval steps proposes one token
  // anyway, so an acceptance measured low is measured again, unless drafts
  // always accepted would not pay either; n-gram lookup never probes (its
  // shadow measures it: shadow_ngram).
  int32_t draft_length(DraftSource source, int32_t room, int32_t n_running, const spec::StepCosts& cost,
                       spec::ProposerCost own);
  // Proposes at most k tokens from the prediction (source Prediction) or by
  // n-gram lookup over tokens (Ngram, up to opts.ngram) and sets them as
  // the draft. Returns n_draft (0: nothing proposed).
  int32_t propose(DraftSource source, const SpecOptions& opts, int32_t k);
  // Appends `draft` to tokens as the draft from `source` (n_draft set; a
  // draft model's proposal). Returns n_draft.
  int32_t set_draft(DraftSource source, std::span<const int32_t> draft);
  DraftSource draft_source() const { return draft_source_; }
  // After a verify run of `proposed` draft tokens of which the first
  // `accepted` were the model's own choice: updates the acceptance of the
  // draft's source.
  void on_verified(int32_t proposed, int32_t accepted);
  // N-gram lookup costs no model pass, so where it proposed nothing in this
  // step (its drafts did not pay) its next token is looked up anyway and
  // checked against the token the step samples (on_plain_token): its
  // acceptance follows the text without probes. Text repeats in stretches;
  // probed every few steps, a stretch was found late or not at all.
  void shadow_ngram(const SpecOptions& opts);
  // After a step without a draft sampled `id` for this sequence (before
  // on_token): updates n-gram lookup's acceptance by its shadow's guess.
  void on_plain_token(int32_t id);

  // Appends the sampled token `id` to tokens and delivers its event. n_ctx:
  // the context limit (tokens, prompt + output: the generation ends with
  // Length once tokens.size() reaches it). Returns true when the generation ended (the
  // final event was delivered). Exceptions from the callback propagate (the
  // engine then calls fail()). Engine thread only.
  bool on_token(int32_t id, int32_t n_ctx, Clock::time_point now);

  // Delivers the final event with `reason` (no token) unless one was sent;
  // never throws.
  void finish(FinishReason reason, const std::string& error = {}, const std::string& error_code = {}) noexcept;
  // error_code: GenerationEvent::error_code (request_error_code()).
  void fail(const std::string& error, const std::string& error_code = {}) noexcept {
    finish(FinishReason::Error, error, error_code);
  }

  // GenerationRequest::prompt_logprobs: whether its prefill keeps every
  // position's logits, and the rows of a run of its tokens from n_past
  // ([rows, n_vocab], one per run token): row j scores prompt token n_past +
  // j + 1. Rows past the prompt (a resumed sequence's output) are ignored.
  bool wants_prompt_logprobs() const { return job_.req.prompt_logprobs; }
  int32_t prompt_size() const { return static_cast<int32_t>(job_.req.prompt.size()); }
  void on_prompt_logits(int32_t n_past, std::span<const float> rows, int32_t n_vocab);
  // max_tokens 0: the sequence ends once its prompt is computed.
  bool ends_at_prompt() const { return job_.req.stop.max_tokens == 0; }

  const Usage& usage() const { return usage_; }
  const Timings& timings() const { return timings_; }
  // Gap between the last two tokens (seconds); valid after the second token.
  double last_itl() const { return last_itl_; }
  int32_t n_generated() const { return n_generated_; }
  // Tokens it may still generate (max_tokens less those generated).
  int32_t tokens_left() const { return std::max(0, job_.req.stop.max_tokens - n_generated_); }

 private:
  void deliver_final(GenerationEvent& ev, FinishReason reason);
  std::span<const float> apply_grammar(std::span<const float> logits);
  const std::string& grammar_vocab_piece(int32_t id) const;
  // The event's logprob of `id` (the token just sampled), when asked for.
  std::optional<TokenLogprob> reported_logprob(int32_t id) const;
  std::string flush_text(bool& hit_stop);
  void attach_prompt_logprobs(GenerationEvent& ev);  // on the first event only

  GenerationJob job_;
  const Tokenizer& tok_;
  EngineMetrics* metrics_;
  Sampler sampler_;
  std::vector<float> penalized_;  // the logits logit_bias or a penalty edits (sample())
  Logprobs logprobs_;             // of the last sampled token, when the request asked
  std::unique_ptr<grammar::Matcher> grammar_;  // when the request has a grammar
  std::vector<std::pair<int32_t, float>> eog_kept_;  // apply_grammar(): EOG logits to restore
  StreamDecoder decoder_;
  StopMatcher stop_;
  Usage usage_;
  Timings timings_;
  Clock::time_point admitted_, first_token_, last_token_;
  double last_itl_ = 0;
  int32_t n_generated_ = 0;
  std::optional<spec::PredictionTracker> prediction_;
  std::vector<int32_t> proposal_;  // propose()'s scratch
  DraftSource draft_source_ = DraftSource::None;
  // Per draft source (index: DraftSource - 1), decayed counts of draft
  // tokens accepted and tried (the accepted ones and the first rejected).
  struct Acceptance {
    double accepted = 0, tried = 0;
  };
  std::array<Acceptance, 3> acceptance_{};
  int32_t steps_since_verify_ = 0;
  // shadow_ngram()'s guess for position shadow_pos_ of tokens (-1: none).
  int32_t shadow_token_ = -1;
  size_t shadow_pos_ = 0;
  bool final_sent_ = false;
  std::vector<TokenLogprob> prompt_lp_;  // prompt_logprobs: one per prompt token
  bool prompt_lp_sent_ = false;
};

}  // namespace nexus
