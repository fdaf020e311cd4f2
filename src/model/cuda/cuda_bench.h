// `nexus bench-model --device cuda`: GPU throughput of a model, measured
// against the HBM bound.
//   ppN       prefill: N prompt tokens of one sequence (chunks of 512), eager;
//             t/s = N / seconds.
//   tgN@B     decode: B sequences, each after a 1-token prompt (not timed),
//             N greedy decode steps through decode_greedy (CUDA graphs);
//             t/s = B * N / seconds (aggregate over the batch).
// Bound: a decode step reads every weight once, so steps/s <= HBM bandwidth /
// weight bytes; the bandwidth is measured with device-to-device cudaMemcpy
// of a 1 GiB buffer (read + write counted, as STREAM's copy does). The bound
// row gives B * bandwidth / weight_bytes tokens/s (KV reads ignored).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nexus {

struct CudaBenchOptions {
  std::vector<int32_t> n_prompt = {512};
  std::vector<int32_t> n_gen = {128};
  std::vector<int32_t> batch = {1, 8, 32};
  int32_t gpu_layers = -1;
  int32_t reps = 3;
};

// Runs the tests and returns a markdown report (one line per test with
// mean t/s, and the share of the HBM bound for decode rows). Throws
// nexus::Error without a CUDA device or for an unreadable model.
std::string cuda_bench_markdown(const std::string& path, const CudaBenchOptions& opt);

// Device-to-device copy bandwidth in bytes/s (best of `runs`), counting read
// and write bytes.
double cuda_copy_bandwidth(size_t bytes, int runs);

}  // namespace nexus
