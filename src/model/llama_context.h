// LlamaContext: one sequence's state for a LlamaModel: its KV cache,
// activation buffers and worker threads, and the forward pass over a batch of
// that sequence's tokens.
//
// KV cache layout: per layer, K and V as [n_ctx, n_embd_kv] row-major float32
// (row = position, n_embd_kv = n_head_kv * head_dim). The paged, multi-sequence
// cache of the batching engine replaces this later.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace nexus {

class LlamaModel;
class ThreadPool;

class LlamaContext {
 public:
  // n_ctx: positions the cache holds (tokens); 0 = the model's n_ctx_train.
  // n_threads: kernel threads including the caller; 0 = hardware concurrency.
  // Throws nexus::Error when n_ctx exceeds n_ctx_train or is not positive.
  LlamaContext(const LlamaModel& model, int32_t n_ctx = 0, int32_t n_threads = 0);
  ~LlamaContext();

  // Runs `tokens` (positions n_past() .. n_past()+size-1) through the model as
  // one batch (prefill when size > 1, decode when 1), appends their K/V, and
  // returns the logits of the last token ([n_vocab], valid until the next
  // call). Throws nexus::Error when the tokens do not fit in the context or an
  // id is outside [0, n_vocab).
  std::span<const float> eval(std::span<const int32_t> tokens);

  // Like eval, but returns the logits of every token: [tokens.size(), n_vocab].
  std::span<const float> eval_all(std::span<const int32_t> tokens);

  int32_t n_past() const { return n_past_; }
  int32_t n_ctx() const { return n_ctx_; }
  // Forgets positions >= n (0 clears the sequence). Cheap: no memory is touched.
  void truncate(int32_t n);

 private:
  struct Activations;
  void forward(std::span<const int32_t> tokens, bool all_logits);
  void attention(int32_t layer, int32_t n_tokens);

  const LlamaModel& model_;
  int32_t n_ctx_ = 0;
  int32_t n_past_ = 0;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<float> k_cache_, v_cache_;  // [n_layer][n_ctx][n_embd_kv]
  std::vector<float> logits_;
  std::vector<int32_t> rows_;  // batch rows whose logits are wanted
  std::unique_ptr<Activations> act_;
};

}  // namespace nexus
