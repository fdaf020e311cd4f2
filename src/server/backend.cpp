#include "server/backend.h"

#include <algorithm>

#include "engine/engine_metrics.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "server/embeddings.h"
#include "tokenizer/tokenizer.h"

namespace nexus::server {

EngineBackend::EngineBackend(Engine& engine, std::string model_id, ChatTemplate chat_template)
    : engine_(engine), model_id_(std::move(model_id)), chat_template_(std::move(chat_template)) {
  // A vocabulary entry is at least as long as the input it stands for: "▁"
  // (3 bytes) for a space, "<0x41>" for a byte, byte-level symbols of 1-2
  // bytes per byte, special tokens their literal text.
  const Tokenizer& tok = engine_.tokenizer();
  for (int32_t id = 0; id < tok.n_vocab(); ++id) max_token_bytes_ = std::max(max_token_bytes_, tok.token_text(id).size());
}

int32_t EngineBackend::n_ctx() const { return engine_.n_ctx(); }

int32_t EngineBackend::n_vocab() const { return engine_.tokenizer().n_vocab(); }

std::vector<int32_t> EngineBackend::tokenize(std::string_view text, bool parse_special) const {
  const Tokenizer& tok = engine_.tokenizer();
  return tok.encode(text, tok.add_bos_default(), parse_special);
}

std::vector<int32_t> EngineBackend::tokenize_continuation(std::string_view text, bool parse_special) const {
  return engine_.tokenizer().encode(text, false, parse_special);
}

std::vector<int32_t> EngineBackend::tokenize_as_output(std::string_view text) const {
  return engine_.tokenizer().encode_as_output(text);
}

std::string EngineBackend::detokenize(std::span<const int32_t> ids) const { return engine_.tokenizer().decode(ids); }

int32_t EngineBackend::n_embd() const { return engine_.model().config().n_embd; }

std::vector<float> EngineBackend::embedding(std::span<const int32_t> ids) const {
  const LlamaConfig& c = engine_.model().config();
  const Pooling pooling = pooling_of(c.pooling_type);
  std::lock_guard lock(embed_mu_);
  LlamaContext ctx(engine_.model(), static_cast<int32_t>(ids.size()), 0);
  return pool_hidden(ctx.eval_hidden(ids), c.n_embd, pooling);
}

std::string EngineBackend::token_piece(int32_t id) const {
  const Tokenizer& tok = engine_.tokenizer();
  return id >= 0 && id < tok.n_vocab() ? tok.token_to_piece(id, true) : std::string();
}

bool EngineBackend::is_end_of_generation(int32_t token) const {
  const Tokenizer& tok = engine_.tokenizer();
  return token >= 0 && token < tok.n_vocab() && tok.is_eog(token);
}

int32_t EngineBackend::control_token(std::string_view text) const {
  const Tokenizer& tok = engine_.tokenizer();
  const int32_t id = tok.find_token(text);
  return id >= 0 && tok.token_to_piece(id, false).empty() ? id : -1;
}

std::shared_ptr<RequestHandle> EngineBackend::submit(GenerationRequest req, EventCallback on_event) {
  return engine_.submit(std::move(req), std::move(on_event));
}

std::string EngineBackend::metrics_text() const { return engine_.metrics().render(); }

LoadReport EngineBackend::load() const {
  const EngineStats st = engine_.stats();
  return {st.running, st.waiting, st.kv_blocks_used, st.kv_blocks_total};
}

LiveCounters EngineBackend::live_counters() const {
  const EngineMetrics& m = engine_.metrics();
  const auto buckets = [](const metrics::Histogram& h) { return BucketCounts{h.bounds(), h.bucket_counts()}; };
  LiveCounters c;
  c.ttft_s = buckets(m.ttft());
  c.itl_s = buckets(m.itl());
  c.steps = m.step().count();
  c.step_seconds = m.step().sum();
  c.batch_sequences = m.batch_sequences().sum();
  c.batch_tokens = m.batch_tokens().sum();
  const EngineStats st = engine_.stats();
  c.running = st.running;
  c.waiting = st.waiting;
  c.kv_used_blocks = st.kv_blocks_used;
  c.kv_cached_blocks = st.kv_blocks_cached;
  c.kv_total_blocks = st.kv_blocks_total;
  return c;
}

}  // namespace nexus::server
