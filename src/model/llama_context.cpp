// The llama forward pass over one sequence's batch of tokens. Reads like the
// math in llama_model.h: buffers are named after what they hold, the kernels
// (src/kernels) say how each step is computed.
#include "model/llama_context.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"
#include "model/forward_steps.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {

struct LlamaContext::Activations : nexus::Activations {};

LlamaContext::LlamaContext(const LlamaModel& model, int32_t n_ctx, int32_t n_threads)
    : model_(model), act_(std::make_unique<Activations>()) {
  const LlamaConfig& c = model.config();
  if (c.head_dim > kMaxHeadDim)
    throw Error("head size " + std::to_string(c.head_dim) + " exceeds the supported " + std::to_string(kMaxHeadDim));
  n_ctx_ = n_ctx == 0 ? c.n_ctx_train : n_ctx;
  if (n_ctx_ <= 0 || n_ctx_ > c.n_ctx_train)
    throw Error("context size " + std::to_string(n_ctx_) + " must be in [1, " + std::to_string(c.n_ctx_train) +
                "] (the model's training context)");
  pool_ = std::make_unique<ThreadPool>(n_threads);
  const size_t cache = static_cast<size_t>(c.n_layer) * n_ctx_ * c.n_embd_kv();
  k_cache_.assign(cache, 0.0f);
  v_cache_.assign(cache, 0.0f);
}

LlamaContext::~LlamaContext() = default;

void LlamaContext::truncate(int32_t n) {
  if (n < 0) n = 0;
  if (n < n_past_) n_past_ = n;
}

std::span<const float> LlamaContext::eval(std::span<const int32_t> tokens) {
  forward(tokens, false);
  return {logits_.data(), static_cast<size_t>(model_.config().n_vocab)};
}

std::span<const float> LlamaContext::eval_all(std::span<const int32_t> tokens) {
  forward(tokens, true);
  return logits_;
}

void LlamaContext::forward(std::span<const int32_t> tokens, bool all_logits) {
  const LlamaConfig& c = model_.config();
  const int32_t n = static_cast<int32_t>(tokens.size());
  if (n == 0) throw Error("eval: no tokens");
  if (n_past_ + n > n_ctx_)
    throw Error("eval: " + std::to_string(n_past_ + n) + " tokens do not fit in the context of " +
                std::to_string(n_ctx_));
  check_token_ids(c, tokens, "eval");

  Activations& a = *act_;
  a.resize(c, static_cast<size_t>(n));
  const int64_t E = c.n_embd, KV = c.n_embd_kv();

  embed_tokens(model_, tokens, a);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const LlamaLayer& L = model_.layers()[static_cast<size_t>(l)];
    attention_inputs(model_, L, a, n, *pool_);
    for (int32_t t = 0; t < n; ++t) {
      rope(&a.q[t * E], c.n_head, c.head_dim, c.n_rot, n_past_ + t, c.rope_freq_base);
      rope(&a.k[t * KV], c.n_head_kv, c.head_dim, c.n_rot, n_past_ + t, c.rope_freq_base);
    }
    const size_t layer_off = static_cast<size_t>(l) * n_ctx_ * KV;
    std::memcpy(&k_cache_[layer_off + static_cast<size_t>(n_past_) * KV], a.k.data(), sizeof(float) * n * KV);
    std::memcpy(&v_cache_[layer_off + static_cast<size_t>(n_past_) * KV], a.v.data(), sizeof(float) * n * KV);
    attention(l, n);
    attention_output_and_ffn(model_, L, a, n, *pool_);
  }

  // Logits: of the last token only, unless every position is wanted.
  rows_.clear();
  for (int32_t t = all_logits ? 0 : n - 1; t < n; ++t) rows_.push_back(t);
  output_logits(model_, a, rows_, logits_, *pool_);
  n_past_ += n;
}

// Causal scaled dot-product attention with GQA: query head h reads KV head
// h / (n_head / n_head_kv). Token t of the batch sits at position n_past + t
// and attends to positions [0, n_past + t].
void LlamaContext::attention(int32_t layer, int32_t n_tokens) {
  const LlamaConfig& c = model_.config();
  Activations& a = *act_;
  const int32_t hd = c.head_dim, KV = c.n_embd_kv(), group = c.n_head / c.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* kc = &k_cache_[static_cast<size_t>(layer) * n_ctx_ * KV];
  const float* vc = &v_cache_[static_cast<size_t>(layer) * n_ctx_ * KV];
  const int64_t n_tasks = static_cast<int64_t>(n_tokens) * c.n_head;

  auto heads = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int32_t t = static_cast<int32_t>(task / c.n_head), h = static_cast<int32_t>(task % c.n_head);
      const int32_t kv_off = (h / group) * hd;
      attention_head(&a.q[static_cast<size_t>(t) * c.n_embd + h * hd], kc + kv_off, vc + kv_off, KV,
                     n_past_ + t + 1, hd, scale, &a.att[static_cast<size_t>(t) * c.n_embd + h * hd]);
    }
  };
  if (n_tasks * (n_past_ + n_tokens) * hd < (1 << 15)) heads(0, n_tasks);
  else pool_->parallel_for(n_tasks, heads);
}

}  // namespace nexus
