// LlamaContext over BatchForward: one run per call, identity block table.
#include "model/llama_context.h"

#include <numeric>
#include <string>

#include "model/batch_forward.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {

LlamaContext::LlamaContext(const LlamaModel& model, int32_t n_ctx, int32_t n_threads, KvType kv_type) {
  const LlamaConfig& c = model.config();
  n_ctx_ = n_ctx == 0 ? c.n_ctx_train : n_ctx;
  if (n_ctx_ <= 0 || n_ctx_ > c.n_ctx_train)
    throw Error("context size " + std::to_string(n_ctx_) + " must be in [1, " + std::to_string(c.n_ctx_train) +
                "] (the model's training context)");
  const int32_t n_blocks = (n_ctx_ + kDefaultBlockSize - 1) / kDefaultBlockSize;
  cache_ = std::make_unique<KvCache>(c, n_blocks, kDefaultBlockSize, kv_type);
  forward_ = std::make_unique<BatchForward>(model, *cache_, n_threads, n_ctx_);
  block_table_.resize(static_cast<size_t>(n_blocks));
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

LlamaContext::~LlamaContext() = default;

void LlamaContext::truncate(int32_t n) {
  if (n < 0) n = 0;
  if (n < n_past_) n_past_ = n;
}

std::span<const float> LlamaContext::eval(std::span<const int32_t> tokens) { return forward(tokens, false); }

std::span<const float> LlamaContext::eval_all(std::span<const int32_t> tokens) { return forward(tokens, true); }

std::span<const float> LlamaContext::eval_hidden(std::span<const int32_t> tokens) { return forward(tokens, false, true); }

std::span<const float> LlamaContext::forward(std::span<const int32_t> tokens, bool all_logits, bool hidden) {
  if (tokens.empty()) throw Error("eval: no tokens");
  if (static_cast<int64_t>(n_past_) + static_cast<int64_t>(tokens.size()) > n_ctx_)
    throw Error("eval: " + std::to_string(n_past_ + tokens.size()) + " tokens do not fit in the context of " +
                std::to_string(n_ctx_));
  SeqRun run;
  run.tokens = tokens;
  run.n_past = n_past_;
  run.block_table = block_table_;
  run.all_logits = all_logits;
  const std::span<const SeqRun> runs(&run, 1);
  std::span<const float> logits = hidden ? forward_->hidden_states(runs) : forward_->forward(runs);
  n_past_ += static_cast<int32_t>(tokens.size());
  return logits;
}

}  // namespace nexus
