#include "model/cpu_tail.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {

CpuTail::CpuTail(const LlamaModel& model, int32_t first_layer, int32_t n_blocks, int32_t block_size,
                 int32_t n_threads)
    : model_(model), first_layer_(first_layer), tail_config_(model.config()) {
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

  const int32_t bs = cache_->block_size();
  for (int32_t l = first_layer_; l < c.n_layer; ++l) {
    const LlamaLayer& L = model_.layers()[static_cast<size_t>(l)];
    attention_inputs(model_, L, act_, {0, n}, *pool_);
    for (int32_t t = 0; t < n; ++t) {
      rope(&act_.q[t * E], c.n_head, c.head_dim, c.n_rot, pos_[t], c.rope_freq_base);
      rope(&act_.k[t * KV], c.n_head_kv, c.head_dim, c.n_rot, pos_[t], c.rope_freq_base);
    }
    for (int32_t t = 0; t < n; ++t) {
      const int32_t p = pos_[t];
      const int32_t block = runs[static_cast<size_t>(run_of_[t])].block_table[static_cast<size_t>(p / bs)];
      cache_->write(block, l - first_layer_, p % bs, &act_.k[t * KV], &act_.v[t * KV]);
    }
    attention(l - first_layer_, runs);
    attention_output_and_ffn(model_, L, act_, {0, n}, *pool_);
  }
  output_logits(model_, act_, rows_, logits_, *pool_);
  return logits_;
}

// As BatchForward::attention: one task per (token, head), GQA by h / group.
void CpuTail::attention(int32_t layer, std::span<const SeqRun> runs) {
  const LlamaConfig& c = model_.config();
  const int32_t hd = c.head_dim, group = c.n_head / c.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto* base = static_cast<const uint8_t*>(cache_->data());
  const size_t esize = cache_->element_size();
  const int64_t n_tasks = static_cast<int64_t>(pos_.size()) * c.n_head;
  pool_->parallel_for(n_tasks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const size_t t = static_cast<size_t>(task / c.n_head);
      const int32_t h = static_cast<int32_t>(task % c.n_head);
      const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
      PagedKv kv;
      kv.k = base + (cache_->k_offset(0, layer) + kv_off) * esize;
      kv.v = base + (cache_->v_offset(0, layer) + kv_off) * esize;
      kv.block_table = runs[static_cast<size_t>(run_of_[t])].block_table.data();
      kv.block_size = cache_->block_size();
      kv.block_stride = cache_->block_elems();
      kv.kv_stride = cache_->n_embd_kv();
      attention_head_paged_f16(&act_.q[t * c.n_embd + h * hd], kv, pos_[t] + 1, hd, scale,
                               &act_.att[t * c.n_embd + h * hd]);
    }
  });
}

}  // namespace nexus
