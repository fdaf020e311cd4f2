// `nexus run --device cuda`: generation on the GPU backend
// (model/cuda/cuda_forward.h), one sequence, outside the CPU engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampling_params.h"

namespace nexus {
class GgufFile;
}

namespace nexus::cli {

struct CudaRunArgs {
  const GgufFile* gguf = nullptr;  // the model, opened by the caller
  std::string prompt;
  int32_t n_predict = 256;
  int32_t n_ctx = 0;        // 0 = the model's
  int32_t gpu_layers = -1;  // -1 = all
  int32_t n_threads = 0;    // CPU layers past gpu_layers
  bool no_bos = false, ignore_eos = false;
  SamplingParams sampling;
};

// Throws nexus::Error with "no CUDA device: <reason>" (or the no-CUDA-build
// message) when the GPU cannot be used -- checked before the model is read.
void require_cuda_device();

// Streams the completion to stdout and the timings to stderr; returns the
// exit code. Throws nexus::Error on failure.
int run_cuda(const CudaRunArgs& a);

}  // namespace nexus::cli
