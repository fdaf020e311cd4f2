#include "kernels/cuda_device.h"

#include <fmt/format.h>

#include "util/error.h"

#ifdef NEXUS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace nexus {

bool cuda_built() {
#ifdef NEXUS_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available(std::string* reason) {
#ifdef NEXUS_HAVE_CUDA
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // reset the last-error state so later calls start clean
    if (reason) *reason = fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
    return false;
  }
  if (n < 1) {
    if (reason) *reason = "the CUDA runtime reports no device";
    return false;
  }
  return true;
#else
  if (reason) *reason = kNoCudaBuildMessage;
  return false;
#endif
}

CudaDeviceInfo cuda_device_info() {
  std::string why;
  if (!cuda_available(&why)) throw Error("no CUDA device: " + why);
  CudaDeviceInfo info;
#ifdef NEXUS_HAVE_CUDA
  cudaDeviceProp p{};
  cudaError_t err = cudaGetDeviceProperties(&p, 0);
  if (err != cudaSuccess) throw Error(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err));
  info.name = p.name;
  info.cc_major = p.major;
  info.cc_minor = p.minor;
  info.sm_count = p.multiProcessorCount;
  info.total_bytes = p.totalGlobalMem;
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) info.free_bytes = free_b;
  else (void)cudaGetLastError();
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
#endif
  return info;
}

std::string cuda_device_summary(const CudaDeviceInfo& i) {
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB, driver {}.{}, runtime {}.{})", i.name, i.cc_major, i.cc_minor,
                     i.sm_count, static_cast<double>(i.total_bytes) / (1ull << 30), i.driver_version / 1000,
                     (i.driver_version % 1000) / 10, i.runtime_version / 1000, (i.runtime_version % 1000) / 10);
}

}  // namespace nexus
