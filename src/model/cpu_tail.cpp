#include "model/cpu_tail.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/attention.h"
#include "kernels/attention_window.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"
#include "model/cpu_ops.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {

CpuTail::CpuTail(const LlamaModel& model, int32_t first_layer, int32_t n_blocks, int32_t block_size,
                 int32_t n_threads, int32_t n_ctx)
    : model_(model), first_layer_(first_layer), tail_config_(model.config()), rope_factors_(model.rope_factors_for(n_ctx)) {
  const LlamaConfig& c = model.config();
  if (first_layer < 0 || first_layer > c.n_layer)
    throw Error("cpu tail: first layer " + std::to_string(first_layer) + " outside [0, " + std::to_string(c.n_layer) +
                "]");
  if (c.head_dim > kMaxHeadDim) throw Error("head size " + std::to_string(c.head_dim) + " exceeds the supported 256");
  // A cache needs at least one layer; an empty tail keeps a 1-layer one unused.
  tail_config_.n_layer = std::max(1, c.n_layer - first_layer);
  cache_ = std::make_unique<KvCache>(tail_config_, n_blocks, block_size, KvType::F16);
  pool_ = std::make_unique<ThreadPool>(n_threads);
}

CpuTail::~CpuTail() = default;

std::span<const float> CpuTail::forward(std::span<const float> x, std::span<const SeqRun> runs) {
  const LlamaConfig& c = model_.config();
  pos_.clear();
  run_of_.clear();
  rows_.clear();
  for (size_t r = 0; r < runs.size(); ++r) {
    for (size_t i = 0; i < runs[r].tokens.size(); ++i) {
      pos_.push_back(runs[r].n_past + static_cast<int32_t>(i));
      run_of_.push_back(static_cast<int32_t>(r));
    }
    if (runs[r].want_logits) rows_.push_back(static_cast<int32_t>(pos_.size()) - 1);
  }
  const int32_t n = static_cast<int32_t>(pos_.size());
  const int64_t E = c.n_embd, KV = c.n_embd_kv();
  if (static_cast<int64_t>(x.size()) != n * E)
    throw Error("cpu tail: residual of " + std::to_string(x.size()) + " values for " + std::to_string(n) + " tokens");
  act_.resize(c, static_cast<size_t>(n));
  std::copy(x.begin(), x.end(), act_.x.begin());

  const float* factors = rope_factors_;
  const bool swa_rope = c.n_swa > 0 && c.rope_freq_base_swa != c.rope_freq_base;
  rope_cs_.resize(static_cast<size_t>(n) * c.n_rot);
  rope_tables(c, factors, pos_.data(), n, false, rope_cs_.data());
  if (swa_rope) {
    rope_cs_swa_.resize(static_cast<size_t>(n) * c.n_rot);
    rope_tables(c, factors, pos_.data(), n, true, rope_cs_swa_.data());
  }
  const int32_t bs = cache_->block_size();
  auto attend = [&](int32_t l, const float* q, const float* k, const float* v, float* out, int64_t) {
    for (int32_t t = 0; t < n; ++t) {
      const int32_t p = pos_[t];
      const int32_t block = runs[static_cast<size_t>(run_of_[t])].block_table[static_cast<size_t>(p / bs)];
      cache_->write(block, l - first_layer_, p % bs, &k[t * KV], &v[t * KV]);
    }
    attention(l, runs, q, out);
  };
  auto ops = cpu_ops(c, *pool_, RopeTables{rope_cs_.data(), swa_rope ? rope_cs_swa_.data() : nullptr}, attend);
  const LayerBuffers b = act_.rows_from(c, 0);
  for (int32_t l = first_layer_; l < c.n_layer; ++l) forward_layer(ops, c, model_.layers()[static_cast<size_t>(l)], l, b, n);
  output_logits(model_, act_, rows_, logits_, *pool_);
  return logits_;
}

// As BatchForward::attention: one task per (token, head), GQA by h / group;
// a windowed layer or soft-capped scores take attention_head_paged_window.
void CpuTail::attention(int32_t layer, std::span<const SeqRun> runs, const float* q, float* out) {
  const LlamaConfig& c = model_.config();
  const int32_t hd = c.head_dim, group = c.n_head / c.n_head_kv, Q = c.n_embd_q();
  const float scale = c.attn_scale, cap = c.attn_softcap;
  const int32_t window = c.is_swa(layer) ? c.n_swa : 0;
  const int32_t cache_layer = layer - first_layer_;
  const auto* base = static_cast<const uint8_t*>(cache_->data());
  const size_t esize = cache_->element_size();
  const int64_t n_tasks = static_cast<int64_t>(pos_.size()) * c.n_head;
  pool_->parallel_for(n_tasks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const size_t t = static_cast<size_t>(task / c.n_head);
      const int32_t h = static_cast<int32_t>(task % c.n_head);
      const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
      PagedKv kv;
      kv.k = base + (cache_->k_offset(0, cache_layer) + kv_off) * esize;
      kv.v = base + (cache_->v_offset(0, cache_layer) + kv_off) * esize;
      kv.block_table = runs[static_cast<size_t>(run_of_[t])].block_table.data();
      kv.block_size = cache_->block_size();
      kv.block_stride = cache_->block_stride(cache_layer);
      kv.kv_stride = cache_->n_embd_kv();
      const int64_t at = static_cast<int64_t>(t) * Q + h * hd;
      const int32_t n_keys = pos_[t] + 1, first = window > 0 ? std::max(0, n_keys - window) : 0;
      if (first > 0 || cap > 0) attention_head_paged_window(&q[at], kv, KvElem::F16, first, n_keys, hd, scale, cap, &out[at]);
      else attention_head_paged_f16(&q[at], kv, n_keys, hd, scale, &out[at]);
    }
  });
}

}  // namespace nexus
