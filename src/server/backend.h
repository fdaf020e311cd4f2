// Backend: what the HTTP server needs from the inference side. The real one
// wraps an Engine (EngineBackend below); tests substitute a scripted fake so
// the HTTP layer can be exercised without a model.
//
// Threading: every method may be called from any I/O thread concurrently.
// submit() follows Engine::submit's contract: on_event runs on a thread the
// caller does not own, must not block, and the last event has done = true.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/chat_template.h"
#include "server/live_stats.h"

namespace nexus::server {

// What GET /load reports (docs/metrics.md, "Load endpoint"): sequences
// running, requests waiting, KV blocks referenced and in the pool.
struct LoadReport {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_used_blocks = 0;
  int32_t kv_total_blocks = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The id clients must name in "model" (or omit): general.name or file stem.
  virtual const std::string& model_id() const = 0;
  virtual int32_t n_ctx() const = 0;     // tokens: prompt + completion must fit
  virtual int32_t n_vocab() const = 0;
  // The chat template prompts are rendered with (chat_template.h).
  virtual const ChatTemplate& chat_template() const = 0;
  virtual std::vector<int32_t> tokenize(std::string_view text, bool parse_special) const = 0;
  // The same without BOS, for a segment appended to a conversation
  // (realtime sessions). The default suits backends whose tokenize() adds none.
  virtual std::vector<int32_t> tokenize_continuation(std::string_view text, bool parse_special) const {
    return tokenize(text, parse_special);
  }
  // Text as the model's output would spell it (Tokenizer::encode_as_output:
  // no BOS, no special tokens, no space prefix): a request's `prediction`.
  // The default suits backends whose tokenize_continuation() adds nothing.
  virtual std::vector<int32_t> tokenize_as_output(std::string_view text) const {
    return tokenize_continuation(text, false);
  }
  // The longest vocabulary entry, in bytes: no token stands for more input
  // bytes than this, so text of more than n * max_token_bytes() bytes takes
  // more than n tokens (realtime sessions refuse such input before
  // tokenizing it). The default, 256, suits test backends.
  virtual size_t max_token_bytes() const { return 256; }
  // The id of the control token whose text is `text` (one the output's text
  // leaves out, e.g. "[TOOL_CALLS]"), -1 when the vocabulary has none
  // (the default).
  virtual int32_t control_token(std::string_view text) const { return -1; }
  // Token ids (each in [0, n_vocab)) -> text, as Tokenizer::decode (the
  // leading space of add_space_prefix removed; control tokens give "").
  // The default (a backend without a tokenizer) joins nothing: "".
  virtual std::string detokenize(std::span<const int32_t> ids) const { return {}; }
  // The bytes of token `id` (in [0, n_vocab)), control tokens as their
  // text; may be part of a UTF-8 character. "" by default.
  virtual std::string token_piece(int32_t id) const { return {}; }
  // /v1/embeddings (embeddings.h): the embedding width (0: none), and the
  // final hidden states of `ids` (1 <= size < n_ctx, each in the
  // vocabulary) pooled by the model's pooling type, not normalized.
  virtual int32_t n_embd() const { return 0; }
  virtual std::vector<float> embedding(std::span<const int32_t> ids) const { return {}; }
  // Whether `token` ends a generation (EOS/EOT); false by default.
  virtual bool is_end_of_generation(int32_t token) const { return false; }
  // Engine::end_session: releases the KV a session keeps. No-op by default.
  virtual void end_session(uint64_t session) {}
  // nullptr when the queue is full (HTTP 429).
  virtual std::shared_ptr<RequestHandle> submit(GenerationRequest req, EventCallback on_event) = 0;
  // GET /metrics: the Prometheus text exposition format 0.0.4. A backend
  // without metrics exposes none (an empty document is valid).
  virtual std::string metrics_text() const { return {}; }
  // GET /load: the engine's counters now (EngineStats); all zero by default.
  virtual LoadReport load() const { return {}; }
  // GET /v1/stats/stream: the cumulative counters and gauges now
  // (live_stats.h), read without waiting on the engine thread; called once a
  // second on an I/O thread. All zero by default.
  virtual LiveCounters live_counters() const { return {}; }
};

// Backend over a running Engine (which must outlive it). BOS follows the
// tokenizer's default (tokenizer.ggml.add_bos_token); chat prompts whose
// template wrote BOS itself are tokenized without another (prompt_builder.h).
class EngineBackend final : public Backend {
 public:
  EngineBackend(Engine& engine, std::string model_id, ChatTemplate chat_template);
  const std::string& model_id() const override { return model_id_; }
  int32_t n_ctx() const override;
  int32_t n_vocab() const override;
  const ChatTemplate& chat_template() const override { return chat_template_; }
  std::vector<int32_t> tokenize(std::string_view text, bool parse_special) const override;
  std::vector<int32_t> tokenize_continuation(std::string_view text, bool parse_special) const override;
  std::vector<int32_t> tokenize_as_output(std::string_view text) const override;
  bool is_end_of_generation(int32_t token) const override;
  size_t max_token_bytes() const override { return max_token_bytes_; }
  int32_t control_token(std::string_view text) const override;
  std::string detokenize(std::span<const int32_t> ids) const override;
  std::string token_piece(int32_t id) const override;
  int32_t n_embd() const override;
  // Runs on the caller's thread through its own LlamaContext (a float32 KV
  // cache sized to the input), one call at a time; ApiError 500 for a
  // pooling type embeddings.h does not implement.
  std::vector<float> embedding(std::span<const int32_t> ids) const override;
  void end_session(uint64_t session) override { engine_.end_session(session); }
  std::shared_ptr<RequestHandle> submit(GenerationRequest req, EventCallback on_event) override;
  std::string metrics_text() const override;  // the engine's EngineMetrics
  LoadReport load() const override;           // Engine::stats()
  LiveCounters live_counters() const override;  // EngineMetrics + Engine::stats()

 private:
  Engine& engine_;
  mutable std::mutex embed_mu_;  // one embedding at a time (they use all kernel threads)
  std::string model_id_;
  ChatTemplate chat_template_;
  size_t max_token_bytes_ = 1;
};

}  // namespace nexus::server
