#include "engine/engine_metrics.h"

namespace nexus {

using metrics::exponential_buckets;
using metrics::latency_buckets_seconds;

namespace {

constexpr const char* kKvBlocksHelp =
    "KV cache blocks by state: used (referenced by a sequence), free (empty), "
    "cached (unreferenced, holding a reusable prefix, evictable).";
constexpr const char* kKvSwaBlocksHelp =
    "Blocks of the sliding-window layers' KV pool by state (0 for models without such layers).";

// nexus_requests_total, one series per finish reason, indexed by FinishReason.
std::array<metrics::IntCounter*, 4> register_requests(metrics::Registry& reg) {
  std::array<metrics::IntCounter*, 4> out{};
  for (FinishReason f : {FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled, FinishReason::Error})
    out.at(static_cast<size_t>(f)) = &reg.int_counter("nexus_requests_total", "Finished requests by finish reason.",
                                                      {{"finish_reason", finish_reason_name(f)}});
  return out;
}

// One counter per proposer, indexed by EngineMetrics::kProposer*.
std::array<metrics::IntCounter*, 3> register_spec(metrics::Registry& reg, const char* name, const char* help) {
  return {&reg.int_counter(name, help, {{"proposer", "prediction"}}), &reg.int_counter(name, help, {{"proposer", "ngram"}}),
          &reg.int_counter(name, help, {{"proposer", "draft"}})};
}

}  // namespace

RequestRecord request_record(const GenerationEvent& ev, double e2e_s, int32_t cached_prompt_tokens) {
  RequestRecord r;
  r.queue_s = ev.timings.queue_s;
  r.ttft_s = ev.usage.completion_tokens > 0 ? ev.timings.ttft_s : -1;
  r.e2e_s = e2e_s;
  r.prompt_tokens = ev.usage.prompt_tokens;
  r.cached_prompt_tokens = cached_prompt_tokens;
  r.completion_tokens = ev.usage.completion_tokens;
  r.finish = ev.finish;
  return r;
}

// Registration order is the order of /metrics.
EngineMetrics::EngineMetrics()
    : queue_(registry_.histogram("nexus_request_queue_seconds",
                                 "Time from submission to the request's first scheduling (prefill start), seconds.",
                                 latency_buckets_seconds())),
      ttft_(registry_.histogram("nexus_time_to_first_token_seconds",
                                "Time from submission to the first generated token (TTFT), seconds. "
                                "Requests that generated no token are not observed.",
                                latency_buckets_seconds())),
      itl_(registry_.histogram("nexus_inter_token_latency_seconds",
                               "Time between two consecutive generated tokens of one request (ITL), seconds.",
                               latency_buckets_seconds())),
      e2e_(registry_.histogram("nexus_e2e_request_latency_seconds",
                               "Time from submission to the request's final event, seconds.",
                               latency_buckets_seconds())),
      requests_(register_requests(registry_)),
      prompt_tokens_(registry_.int_counter("nexus_prompt_tokens_total", "Prompt tokens of finished requests.")),
      cached_prompt_tokens_(registry_.int_counter(
          "nexus_cached_prompt_tokens_total",
          "Prompt tokens of finished requests whose K/V came from the cache instead of being computed.")),
      generation_tokens_(
          registry_.int_counter("nexus_generation_tokens_total", "Tokens generated for finished requests.")),
      step_(registry_.histogram("nexus_step_seconds",
                                "Duration of one engine step (one batched forward pass), seconds.",
                                latency_buckets_seconds())),
      batch_tokens_(registry_.histogram("nexus_batch_tokens", "Tokens evaluated in one engine step (prefill + decode).",
                                        exponential_buckets(1, 2, 11))),
      batch_sequences_(registry_.histogram("nexus_batch_sequences", "Sequences batched in one engine step.",
                                           exponential_buckets(1, 2, 11))),
      preemptions_(registry_.int_counter("nexus_preemptions_total",
                                         "Running sequences preempted (KV blocks reclaimed, requeued).")),
      spec_proposed_(register_spec(registry_, "nexus_spec_proposed_tokens_total",
                                   "Speculative decoding: draft tokens verified, by proposer.")),
      spec_accepted_(register_spec(registry_, "nexus_spec_accepted_tokens_total",
                                   "Speculative decoding: draft tokens accepted (the model's own choice), by proposer.")),
      spec_accepted_length_(registry_.histogram("nexus_spec_accepted_length",
                                                "Speculative decoding: draft tokens accepted per verify run.",
                                                {0, 1, 2, 3, 4, 6, 8, 12, 16})),
      spec_verify_step_(registry_.histogram("nexus_spec_verify_step_seconds",
                                            "Duration of engine steps that verified at least one draft, seconds.",
                                            latency_buckets_seconds())),
      running_(registry_.gauge("nexus_running_sequences", "Sequences in the running batch.")),
      waiting_(registry_.gauge("nexus_waiting_requests", "Requests queued and not yet scheduled.")),
      kv_total_(registry_.gauge("nexus_kv_blocks_total", "KV cache blocks in the pool.")),
      kv_used_(registry_.gauge("nexus_kv_blocks", kKvBlocksHelp, {{"state", "used"}})),
      kv_free_(registry_.gauge("nexus_kv_blocks", kKvBlocksHelp, {{"state", "free"}})),
      kv_cached_(registry_.gauge("nexus_kv_blocks", kKvBlocksHelp, {{"state", "cached"}})),
      kv_swa_total_(registry_.gauge("nexus_kv_swa_blocks_total", "Blocks in the sliding-window layers' KV pool.")),
      kv_swa_used_(registry_.gauge("nexus_kv_swa_blocks", kKvSwaBlocksHelp, {{"state", "used"}})),
      kv_swa_free_(registry_.gauge("nexus_kv_swa_blocks", kKvSwaBlocksHelp, {{"state", "free"}})),
      kv_swa_cached_(registry_.gauge("nexus_kv_swa_blocks", kKvSwaBlocksHelp, {{"state", "cached"}})),
      kv_swa_per_seq_max_(registry_.gauge("nexus_kv_swa_blocks_per_seq_max",
                                          "Most sliding-window KV blocks one sequence has held at once since start.")),
      prefix_queried_(registry_.int_counter("nexus_prefix_cache_queried_tokens_total",
                                            "Prompt tokens looked up in the prefix cache.")),
      prefix_hit_(registry_.int_counter("nexus_prefix_cache_hit_tokens_total",
                                        "Prompt tokens found in the prefix cache (hit rate: divide the rates).")) {}

void EngineMetrics::observe_request(const RequestRecord& r) noexcept {
  queue_.observe(r.queue_s);
  if (r.ttft_s >= 0) ttft_.observe(r.ttft_s);
  e2e_.observe(r.e2e_s);
  const int f = static_cast<int>(r.finish);
  if (f >= 0 && f < static_cast<int>(requests_.size())) requests_[static_cast<size_t>(f)]->inc();
  prompt_tokens_.inc(r.prompt_tokens);
  cached_prompt_tokens_.inc(r.cached_prompt_tokens);
  generation_tokens_.inc(r.completion_tokens);
}

void EngineMetrics::observe_itl(double seconds) noexcept { itl_.observe(seconds); }

void EngineMetrics::observe_step(double seconds, int32_t batch_tokens, int32_t batch_sequences) noexcept {
  step_.observe(seconds);
  batch_tokens_.observe(batch_tokens);
  batch_sequences_.observe(batch_sequences);
}

void EngineMetrics::observe_draft(int proposer, int32_t proposed, int32_t accepted) noexcept {
  if (proposer < 0 || proposer >= static_cast<int>(spec_proposed_.size())) return;
  spec_proposed_[static_cast<size_t>(proposer)]->inc(proposed);
  spec_accepted_[static_cast<size_t>(proposer)]->inc(accepted);
  spec_accepted_length_.observe(accepted);
}

void EngineMetrics::observe_verify_step(double seconds) noexcept { spec_verify_step_.observe(seconds); }

void EngineMetrics::add_preemption() noexcept { preemptions_.inc(); }

void EngineMetrics::set_gauges(const EngineGauges& g) noexcept {
  // One grouped update so a scrape never sees used + free + cached != total.
  registry_.set_gauges({{&running_, g.running_sequences},
                        {&waiting_, g.waiting_requests},
                        {&kv_total_, g.kv_blocks_total},
                        {&kv_used_, g.kv_blocks_used},
                        {&kv_free_, g.kv_blocks_free},
                        {&kv_cached_, g.kv_blocks_cached},
                        {&kv_swa_total_, g.kv_swa_blocks_total},
                        {&kv_swa_used_, g.kv_swa_blocks_used},
                        {&kv_swa_free_, g.kv_swa_blocks_free},
                        {&kv_swa_cached_, g.kv_swa_blocks_cached},
                        {&kv_swa_per_seq_max_, g.kv_swa_blocks_per_seq_max}});
  prefix_queried_.advance_to(g.prefix_cache_queried_tokens);
  prefix_hit_.advance_to(g.prefix_cache_hit_tokens);
}

}  // namespace nexus
