// Error checks for CUDA runtime and cuBLAS calls: every failure becomes a
// nexus::Error naming the call, the file:line and the library's message.
// After a kernel launch, NEXUS_CUDA_CHECK_LAUNCH() picks up launch errors
// (bad configuration) without synchronizing.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "util/error.h"

namespace nexus::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw Error(std::string("CUDA error: ") + call + " failed at " + file + ":" + std::to_string(line) + ": " +
              cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")");
}

// The status's name from the loaded cuBLAS (kernels/cuda/cublas_api.h).
const char* cublas_status_string(cublasStatus_t st);

[[noreturn]] inline void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line) {
  throw Error(std::string("cuBLAS error: ") + call + " failed at " + file + ":" + std::to_string(line) + ": " +
              cublas_status_string(st));
}

}  // namespace nexus::cuda

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    const cudaError_t nexus_cuda_err_ = (call);                                      \
    if (nexus_cuda_err_ != cudaSuccess)                                              \
      ::nexus::cuda::throw_cuda_error(nexus_cuda_err_, #call, __FILE__, __LINE__);   \
  } while (0)

#define CUBLAS_CHECK(call)                                                            \
  do {                                                                                \
    const cublasStatus_t nexus_cublas_st_ = (call);                                   \
    if (nexus_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::nexus::cuda::throw_cublas_error(nexus_cublas_st_, #call, __FILE__, __LINE__); \
  } while (0)

#define NEXUS_CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
