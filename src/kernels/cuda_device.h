// Whether a CUDA GPU can be used, asked without crashing where there is none.
//
// Built in every configuration: without the CUDA backend (NEXUS_CUDA=OFF)
// cuda_available() is always false and says so. With it, the CUDA runtime is
// asked for its device count; a machine without a driver or device answers
// with an error code (cudaErrorNoDevice, cudaErrorInsufficientDriver, ...),
// which becomes `false` and the runtime's own message -- never an abort.
#pragma once

#include <cstddef>
#include <string>

namespace nexus {

// The message of builds without the backend (what `--device cuda` prints).
inline constexpr const char* kNoCudaBuildMessage = "this build has no CUDA support (rebuild with -DNEXUS_CUDA=ON)";

// True when this binary contains the CUDA backend (NEXUS_HAVE_CUDA).
bool cuda_built();

// True when device 0 can be used. Otherwise false, and *reason (when given)
// says why: no CUDA support in this build, no driver, no device, ...
bool cuda_available(std::string* reason = nullptr);

struct CudaDeviceInfo {
  std::string name;         // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0;   // global memory
  size_t free_bytes = 0;    // free at the time of the call
  int driver_version = 0;   // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;
};

// Properties of device 0. Throws nexus::Error when !cuda_available().
CudaDeviceInfo cuda_device_info();

// One line for logs: "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, driver 13.0)".
std::string cuda_device_summary(const CudaDeviceInfo& info);

}  // namespace nexus
