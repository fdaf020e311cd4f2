// CpuTail: the CPU half of a forward pass split between devices
// (`--gpu-layers N`): layers [first_layer, n_layer) of a LlamaModel and the
// output head, run on the CPU from the residual stream the first part (the
// GPU layers) produced, with their own paged KV cache.
//
// The steps are BatchForward's (model/layer.h forward_layer, attention_head_paged_f16
// over an F16 KvCache), so with first_layer = 0 and the embedded tokens as
// input its logits are BatchForward's bit for bit (tests/test_cpu_tail.cpp).
// Its KvCache holds only the tail's layers; block ids are shared with the
// first part's cache (the same block table serves both).
// Not thread-safe; owns its worker threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/batch_forward.h"
#include "model/forward_steps.h"
#include "model/llama_config.h"

namespace nexus {

class KvCache;

class CpuTail {
 public:
  // Throws nexus::Error when first_layer is outside [0, n_layer] or the
  // cache cannot be made (see KvCache). n_ctx: as BatchForward's.
  CpuTail(const LlamaModel& model, int32_t first_layer, int32_t n_blocks, int32_t block_size, int32_t n_threads = 0,
          int32_t n_ctx = 0);
  ~CpuTail();

  // x: [n, n_embd] residual stream entering layer first_layer, n = total
  // tokens of `runs` (in run order); positions come from each run's n_past.
  // Writes the tail layers' K/V, then returns [rows, n_vocab] logits of the
  // last token of each run with want_logits (valid until the next call).
  // The caller validated the runs (BatchForward's rules).
  std::span<const float> forward(std::span<const float> x, std::span<const SeqRun> runs);

  int32_t first_layer() const { return first_layer_; }
  const KvCache& cache() const { return *cache_; }

 private:
  void attention(int32_t layer, std::span<const SeqRun> runs, const float* q, float* out);

  const LlamaModel& model_;
  int32_t first_layer_;
  LlamaConfig tail_config_;  // the model's, with n_layer = layers in the tail (for the cache)
  const float* rope_factors_ = nullptr;  // LlamaModel::rope_factors_for(n_ctx)
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ThreadPool> pool_;
  Activations act_;
  std::vector<int32_t> pos_, run_of_, rows_;
  std::vector<float> logits_;
  std::vector<float> rope_cs_, rope_cs_swa_;  // [n, n_rot] angles (cpu_ops.h rope_tables)
};

}  // namespace nexus
