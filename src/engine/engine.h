// Engine: owns the model and serves many generations at once on its own
// thread with continuous batching (Yu et al. 2022, "Orca": iteration-level
// scheduling) over a paged KV cache with prefix caching (Kwon et al. 2023,
// "PagedAttention"). Each engine step runs ONE forward pass over a batch made
// of a decode token for every running sequence plus prefill chunks of
// sequences being admitted, under a per-step token budget (chunked prefill,
// as in Sarathi/vLLM), so a long prompt never stalls running streams.
// Scheduling policy (priorities, preemption, budget): engine/scheduler.h.
//
// I/O threads call submit() and cancel(); the engine thread tokenizes nothing
// and blocks on nothing but its inbox when idle. KV blocks of finished
// sequences stay cached: a prompt that starts with a cached prefix (a chat
// turn extending the previous one, a shared system prompt) prefills only the
// rest, in whole blocks (usage.cached_tokens says how many were reused).
//
// Threading contract:
//   - submit()/RequestHandle::cancel() are thread-safe and never block on a
//     running generation.
//   - on_event runs on the engine thread. It must not block (copy the event
//     and post it to your own executor); a slow consumer must never stall the
//     engine.
//   - Cancellation is checked at the start of every step: a cancelled request
//     stops within one token, its blocks are released in that step, and it
//     gets a final event with FinishReason::Cancelled.
//   - Preemption is invisible to the client: a preempted sequence is
//     re-prefilled (prompt + what it generated) when resumed and continues
//     exactly as an uninterrupted run would (same sampler state).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "sampling/sampling_params.h"

namespace nexus {

class Tokenizer;
class LlamaModel;
class EngineMetrics;
namespace grammar {
struct Grammar;
}

enum class FinishReason { Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

// Priority classes; any integer in [kPriorityMin, kPriorityMax] is valid,
// higher is scheduled first.
constexpr int32_t kPriorityInteractive = 10;
constexpr int32_t kPriorityDefault = 0;
constexpr int32_t kPriorityBatch = -10;
constexpr int32_t kPriorityMin = -1000;
constexpr int32_t kPriorityMax = 1000;

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included if wanted; 1 <= size < n_ctx
  SamplingParams sampling;
  StopParams stop;
  int32_t priority = kPriorityDefault;
  // Non-zero: the request belongs to this session. When it ends (for any
  // reason) the engine keeps its sequence's KV (prompt + generated tokens
  // that were evaluated) for the session's next request, which then
  // prefills only what follows the longest common prefix of the kept tokens
  // and its prompt (at least the prompt's last token). Kept sessions are
  // released under memory pressure (before any running sequence is
  // preempted), by end_session(), or when a newer request of the session
  // ends. One request per session at a time: a second concurrent one simply
  // does not find the KV kept. Callers choose ids (e.g. a counter).
  uint64_t session = 0;
  // Constrained decoding (grammar/gbnf.h): when set, every sampled token
  // keeps the output a prefix of a sentence of this grammar, and an
  // end-of-generation token is allowed only where a sentence is complete.
  std::shared_ptr<const grammar::Grammar> grammar;
  // Predicted Outputs: token ids the output is expected to repeat for the
  // most part (e.g. the file being edited); proposed for speculative
  // decoding where they line up with the output (engine/spec/prediction.h
  // gives the alignment rule), reported in Usage. Ids must be in the
  // vocabulary. The output is the same with or without it.
  std::vector<int32_t> prediction;
  // The log-probability of every prompt token given the tokens before it
  // (OpenAI's `echo` + `logprobs`, for scoring): the prefill keeps the logits
  // of every prompt position (BatchForward's all_logits, not a second code
  // path), the prompt is never matched in the prefix cache (a matched
  // position has no logits), and the first event carries them
  // (GenerationEvent::prompt_logprobs), with max(sampling.logprobs, 0)
  // alternatives each, from the raw logits (no bias, penalty or grammar).
  // With stop.max_tokens == 0 the generation ends once the prompt is
  // computed (FinishReason::Length, no token sampled).
  bool prompt_logprobs = false;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens found in the prefix cache (not prefilled)
  // Requests with a prediction (engine/spec/prediction.h): its tokens the
  // output matched, and the rest (accepted + rejected = prediction size).
  int32_t accepted_prediction_tokens = 0;
  int32_t rejected_prediction_tokens = 0;
};

struct Timings {
  double queue_s = 0;      // submit -> first scheduled (seconds)
  double prefill_s = 0;    // first scheduled -> prompt fully processed (seconds)
  double ttft_s = 0;       // submit -> first token sampled (seconds)
  double decode_s = 0;     // first token -> last token (seconds)
  double e2e_s = 0;        // submit -> final event (seconds)
};

// A sampled token's log-probability as reported to clients (OpenAI's
// logprobs), and the most likely alternatives at that step. piece: the
// token's bytes (special tokens rendered as their text; a byte-fallback
// token may be part of a UTF-8 character).
struct TokenLogprob {
  int32_t id = -1;
  std::string piece;
  float logprob = 0.0f;           // natural log (sampling/logprobs.h)
  std::vector<TokenLogprob> top;  // best first; empty in the alternatives themselves
};

// One event per generated step: `text` is the newly finished text (valid UTF-8,
// stop strings withheld, possibly empty). The last event has done = true,
// a finish reason, usage and timings; it may carry text too.
struct GenerationEvent {
  std::string text;
  int32_t token = -1;           // the sampled token, -1 on the final event if none
  // Of `token`, when the request asked (sampling.logprobs >= 0); absent for
  // an end-of-generation token that ends the output (it has no text).
  std::optional<TokenLogprob> logprob;
  // GenerationRequest::prompt_logprobs: on the sequence's first event only,
  // one entry per prompt token in order; entry 0's logprob is NaN (nothing
  // precedes it) and it has no alternatives.
  std::vector<TokenLogprob> prompt_logprobs;
  bool done = false;
  FinishReason finish = FinishReason::Stop;
  std::string error;            // set when finish == Error
  // With an error: the request's own fault, by name ("grammar_too_complex": its
  // grammar passed a matcher bound, grammar/matcher.h), which the protocols
  // answer as a client error (400); empty: the server's fault (500).
  std::string error_code;
  // On the final event of an output ended by one of StopParams::stop: that
  // string (Anthropic's stop_sequence); "" otherwise.
  std::string stop_sequence;
  Usage usage;
  Timings timings;
};

using EventCallback = std::function<void(const GenerationEvent&)>;

class RequestHandle {
 public:
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

// Speculative decoding (Leviathan et al. 2023, Chen et al. 2023): proposed
// tokens for a sequence are verified in the step's batched forward pass
// alongside the other sequences' decode tokens and prefill chunks; the
// longest proposed prefix the model itself would have produced is emitted
// at once, plus the model's next token. Exact: every request's output is
// token for token what it is without speculation (greedy and seeded
// sampling alike: the proposals are point masses, so "draw from the model's
// distribution and accept the proposal iff the draw equals it" is the
// rejection rule min(1, p/q) with its residual p restricted to other
// tokens, and it draws exactly the random numbers a plain run draws).
// Requests with a grammar or logprobs never speculate.
// Proposers, first that proposes wins: a request's `prediction` (always
// used when given), then a draft model (draft_model: a small model of the
// same vocabulary proposing greedily, with its own KV per sequence;
// engine/spec/draft_model.h), then, with proposer = Ngram, prompt lookup
// over the sequence's own text.
// Adaptive (docs/speculative.md "Adaptive"): the draft length is the one
// that makes the step fastest given the sequence's measured acceptance of
// the source and the measured step costs (Sequence::draft_length); 0 when
// none pays, with a one-token probe after spec::probe_interval steps
// without a draft. A step with more than max_seqs running sequences
// speculates for none of them (batched decode already amortises the
// weights; verify tokens would then only add work).
enum class SpecProposer { None, Ngram };
struct SpecOptions {
  SpecProposer proposer = SpecProposer::None;
  int32_t ngram = 3;    // longest n-gram looked up (tokens), >= 1
  int32_t k = 5;        // most proposed tokens per sequence and step, >= 1
  int32_t max_seqs = 4; // no speculation in a step with more running sequences
  // Draft lengths from measured acceptance and step costs (Sequence::
  // draft_length, docs/speculative.md "Adaptive"); false: every source is
  // asked for the longest draft the room allows, so whether and how much a
  // sequence speculates does not depend on timing (tests).
  bool adaptive = true;
  // A draft model (nexus serve --draft-model), or null. It must outlive the
  // engine and have the model's n_vocab (checked: nexus::Error otherwise);
  // the tokenizers' agreement is the caller's check
  // (spec::check_same_vocabulary). Its KV is its own pool, outside
  // kv_memory, with room for min(EngineOptions::max_seqs, max(max_seqs, 1))
  // full contexts of the draft (at most a quarter of available RAM). The
  // engine's constructor times a few draft passes (DraftModel's warm-up), so
  // that a draft that would not pay is never tried.
  const LlamaModel* draft_model = nullptr;
};

struct EngineOptions {
  int32_t n_threads = 0;          // worker threads for the kernels; 0 = hardware concurrency
  int32_t max_queue = 64;         // requests waiting for admission; submit() refuses more
  int32_t n_ctx = 0;              // context per sequence (tokens, prompt + output); 0 = the
                                  // model's n_ctx_train; capped to what the KV pool holds
  int32_t max_seqs = 16;          // sequences running at once (decoding or prefilling)
  int32_t max_batch_tokens = 128; // tokens per engine step (decode tokens + prefill chunks)
  int64_t kv_memory = 0;          // KV pool budget (bytes), split between the global and the
                                  // windowed layers as engine/kv_pool_sizes.h says; 0 = enough for max_seqs full
                                  // contexts, at most a quarter of available RAM
  KvType kv_type = KvType::F16;   // element type of the KV cache
  SpecOptions spec;               // speculative decoding (above)
  // Tests: check the block manager's invariants (BlockManager::validate)
  // after every step; a violation fails every running request with an
  // error naming it. O(blocks) per step.
  bool validate_kv = false;
};

// A snapshot of the engine's state, for tests, tools and metrics.
struct EngineStats {
  int32_t running = 0;          // sequences holding KV blocks (prefilling or decoding)
  int32_t waiting = 0;          // accepted, not running (new or preempted)
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;   // referenced by a sequence
  int32_t kv_blocks_cached = 0; // unreferenced, holding a reusable prefix
  int32_t kv_blocks_free = 0;
  // The windowed layers' pool (model/kv_cache.h KvPool; all 0 for a model
  // without sliding-window layers): blocks by state, the window (positions),
  // and the most windowed blocks one sequence has held at once since start
  // -- at most ceil(window / block_size) + 1 while decoding.
  int32_t kv_swa_blocks_total = 0;
  int32_t kv_swa_blocks_used = 0;
  int32_t kv_swa_blocks_cached = 0;
  int32_t kv_swa_blocks_free = 0;
  int32_t kv_swa_blocks_per_seq_max = 0;
  int32_t swa_window = 0;
  int32_t block_size = 0;       // tokens per block
  int64_t kv_bytes = 0;         // bytes of the whole pool
  int64_t steps = 0;            // forward passes run
  int64_t preemptions = 0;
  int64_t prefix_queried_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;      // of those, found
  int32_t sessions_kept = 0;          // sessions whose KV is kept between requests
  // Speculative decoding, cumulative: tokens proposed and, of those,
  // accepted (by proposer: prediction, draft model, ngram), and verify runs.
  int64_t spec_proposed_prediction = 0;
  int64_t spec_accepted_prediction = 0;
  int64_t spec_proposed_draft = 0;
  int64_t spec_accepted_draft = 0;
  int64_t spec_proposed_ngram = 0;
  int64_t spec_accepted_ngram = 0;
  int64_t spec_verify_runs = 0;
  // The draft model's KV pool (all 0 without one): its blocks, those a
  // draft sequence references, and the sequences that hold draft KV.
  int32_t draft_kv_blocks_total = 0;
  int32_t draft_kv_blocks_used = 0;
  int32_t draft_sequences = 0;
};

class Engine {
 public:
  // Takes the model and tokenizer (which must outlive the engine) and starts
  // the engine thread.
  Engine(const LlamaModel& model, const Tokenizer& tokenizer, EngineOptions opts = {});
  ~Engine();  // cancels everything and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a generation. Returns nullptr when max_queue requests already wait
  // for admission (the server answers 429). Invalid requests (empty prompt,
  // prompt + 1 > n_ctx, token ids out of range, bad sampling parameters,
  // priority out of range) are reported through a single final event with
  // FinishReason::Error.
  std::shared_ptr<RequestHandle> submit(GenerationRequest req, EventCallback on_event);

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const LlamaModel& model() const { return model_; }
  int32_t n_ctx() const;
  // Thread-safe; as of the end of the last engine step.
  EngineStats stats() const;
  // Prometheus metrics (engine/engine_metrics.h); render() is safe from any thread.
  const EngineMetrics& metrics() const;
  // Releases the KV a session keeps (at the next step); thread-safe, never
  // blocks. Unknown ids are ignored.
  void end_session(uint64_t session);

 private:
  struct Impl;
  const LlamaModel& model_;
  const Tokenizer& tokenizer_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus
