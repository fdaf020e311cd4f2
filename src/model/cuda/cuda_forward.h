// CudaForward: BatchForward (model/batch_forward.h) on an NVIDIA GPU.
//
// Weights: at construction the matrices of the first `gpu_layers` layers, the
// token embedding, and (when every layer is on the GPU) the output norm and
// projection are copied once to device memory in their GGUF type (F32, F16,
// BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K: a Q4_K_M file holds Q4_K and Q6_K);
// nothing is converted. Layers past gpu_layers stay in the host mapping and
// run on the CPU (CpuTail) after the GPU part: the residual stream crosses
// PCIe once per step.
//
// KV cache: the GPU layers' K/V live in a device arena with KvCache's layout
// and fp16 elements ([n_blocks + 1][gpu_layers][2][block_size][n_embd_kv];
// the extra block takes the writes of padding rows of a graph bucket); the
// CPU layers' in a host KvCache. Block ids (SeqRun::block_table) address both.
//
// Steps: one forward() or forward_greedy() per batch, same rules as
// BatchForward (several sequences, decode and prefill runs mixed, validated
// before the cache is touched). Per layer: RMSNorm, Q/K/V matmuls, RoPE, K/V
// write, paged attention, output matmul + residual, RMSNorm, SwiGLU FFN +
// residual (kernels/cuda/cuda_kernels.h, cuda_gemm.h).
//
// CUDA graphs: decode_greedy() (every run one token, greedy sampling on the
// GPU) captures the whole step once per batch bucket (gpu_plan.h) the first
// time that bucket is used and replays it afterwards: per step one copy of
// the token/position/block-table arrays to the device, one graph launch, one
// copy of the sampled ids back -- no allocation, no other host sync. Graphs
// need every layer on the GPU; with a CPU tail, or graphs off, the same
// kernels run eagerly.
//
// Accuracy against the CPU: weights widened to float32 (quantized ones are
// not multiplied with 8-bit activations as on the CPU), fp16 GEMM inputs for
// prefill; results agree to rounding, not bit for bit.
// Not thread-safe. Throws nexus::Error (CUDA errors included) from every call.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/batch_forward.h"
#include "model/kv_cache.h"

namespace nexus {

class LlamaModel;

struct CudaForwardOptions {
  int32_t gpu_layers = -1;      // layers on the GPU; -1 = all (gpu_plan.h resolve_gpu_layers)
  int32_t max_seqs = 32;        // sequences per step (and the largest decode bucket)
  int32_t max_tokens = 512;     // tokens per step (a longer prompt is fed in chunks); >= max_seqs
  int32_t max_ctx = 0;          // positions per sequence; 0 = the model's n_ctx_train
  int32_t n_blocks = 0;         // KV blocks; 0 = max_seqs * ceil(max_ctx / block_size)
  int32_t block_size = kDefaultBlockSize;
  bool graphs = true;           // capture and replay decode steps
  int32_t n_threads = 0;        // CPU threads of the CPU tail; 0 = all cores
};

class CudaForward {
 public:
  // Uploads the weights and allocates every device buffer. Throws
  // nexus::Error when there is no CUDA device, a weight type is unsupported,
  // or device memory runs out.
  CudaForward(const LlamaModel& model, const CudaForwardOptions& opt = {});
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  // BatchForward::forward: [rows, n_vocab] float32 logits on the host.
  std::span<const float> forward(std::span<const SeqRun> runs);
  // Same step, but the logits rows are reduced to their argmax on the GPU
  // (greedy; ties to the lowest id): one id per run with want_logits.
  std::span<const int32_t> forward_greedy(std::span<const SeqRun> runs);
  // A decode step: every run has exactly one token (want_logits is ignored:
  // every run gets an id). Replays the bucket's CUDA graph when graphs are on.
  std::span<const int32_t> decode_greedy(std::span<const SeqRun> runs);

  // Logits rows of the last GPU-side step ([n_rows, n_vocab], copied from the
  // device; for tests comparing graph replay with eager runs). Throws when
  // the output head runs on the CPU.
  std::vector<float> last_logits(int32_t n_rows) const;

  int32_t gpu_layers() const;
  int32_t n_blocks() const;
  int32_t block_size() const;
  int32_t max_blocks_per_seq() const;
  bool graphs_enabled() const;
  int32_t graphs_captured() const;
  uint64_t device_weight_bytes() const;   // weights uploaded
  uint64_t device_kv_bytes() const;       // the device KV arena

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus
