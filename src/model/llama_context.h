// LlamaContext: one sequence run through a LlamaModel, for tools and tests
// that need no scheduler (nexus bench-model, reference checks): a thin
// wrapper over BatchForward (model/batch_forward.h) with its own float32
// paged KV cache (float32 unless told) whose block table is simply 0, 1, 2, ... -- the same forward
// pass the engine runs, so its logits are the engine's bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/kv_cache.h"

namespace nexus {

class BatchForward;
class KvCache;
class LlamaModel;

class LlamaContext {
 public:
  // n_ctx: positions the cache holds (tokens); 0 = the model's n_ctx_train.
  // n_threads: kernel threads including the caller; 0 = hardware concurrency.
  // kv_type: how the cache stores K/V (float32 by default, as the
  // references were taken; the server's default is fp16).
  // Throws nexus::Error when n_ctx exceeds n_ctx_train or is not positive.
  LlamaContext(const LlamaModel& model, int32_t n_ctx = 0, int32_t n_threads = 0, KvType kv_type = KvType::F32);
  ~LlamaContext();

  // Runs `tokens` (positions n_past() .. n_past()+size-1) through the model as
  // one batch (prefill when size > 1, decode when 1), appends their K/V, and
  // returns the logits of the last token ([n_vocab], valid until the next
  // call). Throws nexus::Error when the tokens do not fit in the context or an
  // id is outside [0, n_vocab).
  std::span<const float> eval(std::span<const int32_t> tokens);

  // Like eval, but returns the logits of every token: [tokens.size(), n_vocab].
  std::span<const float> eval_all(std::span<const int32_t> tokens);

  // Like eval, but returns every token's final hidden state (after the
  // output norm; BatchForward::hidden_states): [tokens.size(), n_embd].
  std::span<const float> eval_hidden(std::span<const int32_t> tokens);

  int32_t n_past() const { return n_past_; }
  int32_t n_ctx() const { return n_ctx_; }
  // Forgets positions >= n (0 clears the sequence). Cheap: no memory is touched.
  void truncate(int32_t n);

 private:
  std::span<const float> forward(std::span<const int32_t> tokens, bool all_logits, bool hidden = false);

  int32_t n_ctx_ = 0;
  int32_t n_past_ = 0;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<BatchForward> forward_;
  std::vector<int32_t> block_table_;  // 0, 1, 2, ...
};

}  // namespace nexus
