// EngineMetrics: the engine's Prometheus metrics (prefix nexus_), fed by the
// engine thread and rendered for GET /metrics from any I/O thread. Every
// metric is listed with its unit, labels and buckets in docs/metrics.md.
//
// Histograms (latencies in seconds; buckets 0.1 ms .. 10 s, 1-2-5 series):
//   nexus_request_queue_seconds        submit -> first scheduled (prefill start)
//   nexus_time_to_first_token_seconds  submit -> first token sampled (TTFT);
//                                      only requests that generated a token
//   nexus_inter_token_latency_seconds  gap between consecutive tokens of a request (ITL)
//   nexus_e2e_request_latency_seconds  submit -> final event
//   nexus_step_seconds                 one engine step (one forward pass of a batch)
// Histograms (counts; buckets 1, 2, 4, ..., 1024):
//   nexus_batch_tokens                 tokens evaluated in one step (prefill + decode)
//   nexus_batch_sequences              sequences in one step
// Counters:
//   nexus_requests_total{finish_reason="stop|length|cancelled|error"}
//   nexus_prompt_tokens_total, nexus_cached_prompt_tokens_total (prompt tokens
//   whose K/V came from the cache), nexus_generation_tokens_total,
//   nexus_preemptions_total, nexus_prefix_cache_queried_tokens_total,
//   nexus_prefix_cache_hit_tokens_total (hit rate = rate(hit) / rate(queried))
// Speculative decoding (engine.h SpecOptions):
//   nexus_spec_proposed_tokens_total{proposer="prediction|draft|ngram"}, draft
//   tokens verified; nexus_spec_accepted_tokens_total{proposer=...}, of
//   those, accepted; nexus_spec_accepted_length (histogram, buckets
//   0, 1, 2, 3, 4, 6, 8, 12, 16: accepted tokens per verify run);
//   nexus_spec_verify_step_seconds (histogram: steps that verified a draft)
// Gauges:
//   nexus_running_sequences, nexus_waiting_requests,
//   nexus_kv_blocks{state="used|free|cached"}, nexus_kv_blocks_total,
//   nexus_kv_swa_blocks{state=...}, nexus_kv_swa_blocks_total,
//   nexus_kv_swa_blocks_per_seq_max (the sliding-window layers' pool)
//
// Threading: every observe/set/add method is lock-free, allocation-free and
// noexcept (relaxed atomics, see metrics/metrics.h); render() is safe
// concurrently with them and may be a few in-flight observations behind.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "metrics/metrics.h"

namespace nexus {

// One finished request (its final event), for observe_request().
struct RequestRecord {
  double queue_s = 0;   // submit -> first scheduled (seconds)
  double ttft_s = -1;   // submit -> first token (seconds); < 0: no token was generated
  double e2e_s = 0;     // submit -> final event (seconds)
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // of prompt_tokens, not recomputed (KV / prefix cache)
  int32_t completion_tokens = 0;
  FinishReason finish = FinishReason::Stop;
};

// The record of a final event (done = true): usage and timings from the
// event, ttft only when a token was generated.
RequestRecord request_record(const GenerationEvent& final_event, double e2e_s, int32_t cached_prompt_tokens);

// A snapshot of the engine's state for set_gauges(). KV blocks follow
// BlockManager's states, which are disjoint: used + free + cached == total.
struct EngineGauges {
  int32_t running_sequences = 0;  // sequences in the running batch
  int32_t waiting_requests = 0;   // queued, not yet scheduled (preempted ones included)
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;     // referenced by a sequence
  int32_t kv_blocks_free = 0;     // empty
  int32_t kv_blocks_cached = 0;   // unreferenced but holding a reusable prefix (evictable)
  // The sliding-window layers' pool, the same states (all 0 without one),
  // and the most of its blocks one sequence has held at once.
  int32_t kv_swa_blocks_total = 0;
  int32_t kv_swa_blocks_used = 0;
  int32_t kv_swa_blocks_free = 0;
  int32_t kv_swa_blocks_cached = 0;
  int32_t kv_swa_blocks_per_seq_max = 0;
  int64_t prefix_cache_queried_tokens = 0;  // cumulative since start
  int64_t prefix_cache_hit_tokens = 0;      // cumulative since start
};

class EngineMetrics {
 public:
  EngineMetrics();
  EngineMetrics(const EngineMetrics&) = delete;
  EngineMetrics& operator=(const EngineMetrics&) = delete;

  // Once per finished request, at its final event.
  void observe_request(const RequestRecord& r) noexcept;
  // Each gap between two consecutive tokens of one request (seconds).
  void observe_itl(double seconds) noexcept;
  // Each engine step: its duration, tokens evaluated and sequences batched.
  void observe_step(double seconds, int32_t batch_tokens, int32_t batch_sequences) noexcept;
  // Speculative decoding: one verify run's draft of `proposed` tokens from
  // `proposer` (kProposer*), of which `accepted` were accepted; the
  // duration of a step that verified at least one draft.
  static constexpr int kProposerPrediction = 0, kProposerNgram = 1, kProposerDraft = 2;
  void observe_draft(int proposer, int32_t proposed, int32_t accepted) noexcept;
  void observe_verify_step(double seconds) noexcept;
  // A running sequence was preempted (its blocks taken back).
  void add_preemption() noexcept;
  // The current gauges; the cumulative prefix-cache counts become counters
  // (a smaller value than last time is ignored: counters never go down).
  void set_gauges(const EngineGauges& g) noexcept;

  // The Prometheus text exposition format 0.0.4.
  std::string render() const { return registry_.render(); }

  // Read access for live views (server/live_stats.h), safe from any thread.
  const metrics::Histogram& ttft() const { return ttft_; }
  const metrics::Histogram& itl() const { return itl_; }
  const metrics::Histogram& step() const { return step_; }
  const metrics::Histogram& batch_tokens() const { return batch_tokens_; }
  const metrics::Histogram& batch_sequences() const { return batch_sequences_; }

 private:
  metrics::Registry registry_;
  // Requests.
  metrics::Histogram& queue_;
  metrics::Histogram& ttft_;
  metrics::Histogram& itl_;
  metrics::Histogram& e2e_;
  std::array<metrics::IntCounter*, 4> requests_;  // indexed by FinishReason
  metrics::IntCounter& prompt_tokens_;
  metrics::IntCounter& cached_prompt_tokens_;
  metrics::IntCounter& generation_tokens_;
  // Steps.
  metrics::Histogram& step_;
  metrics::Histogram& batch_tokens_;
  metrics::Histogram& batch_sequences_;
  metrics::IntCounter& preemptions_;
  // Speculative decoding, indexed by kProposer*.
  std::array<metrics::IntCounter*, 3> spec_proposed_, spec_accepted_;
  metrics::Histogram& spec_accepted_length_;
  metrics::Histogram& spec_verify_step_;
  // State.
  metrics::Gauge& running_;
  metrics::Gauge& waiting_;
  metrics::Gauge& kv_total_;
  metrics::Gauge& kv_used_;
  metrics::Gauge& kv_free_;
  metrics::Gauge& kv_cached_;
  metrics::Gauge& kv_swa_total_;
  metrics::Gauge& kv_swa_used_;
  metrics::Gauge& kv_swa_free_;
  metrics::Gauge& kv_swa_cached_;
  metrics::Gauge& kv_swa_per_seq_max_;
  metrics::IntCounter& prefix_queried_;
  metrics::IntCounter& prefix_hit_;
};

}  // namespace nexus
