#include "kernels/cuda/cublas_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace nexus::cuda {
namespace {

template <class Fn>
void resolve(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr) throw Error(std::string("cuBLAS: symbol ") + name + " not found: " + dlerror());
}

CublasApi load() {
  void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw Error(std::string("cannot load cuBLAS (libcublas.so.13): ") + dlerror());
  CublasApi api;  // the library stays loaded for the process's life
  resolve(lib, "cublasCreate_v2", api.create);
  resolve(lib, "cublasDestroy_v2", api.destroy);
  resolve(lib, "cublasSetStream_v2", api.set_stream);
  resolve(lib, "cublasSetWorkspace_v2", api.set_workspace);
  resolve(lib, "cublasGemmEx", api.gemm_ex);
  resolve(lib, "cublasSgemm_v2", api.sgemm);
  resolve(lib, "cublasGetStatusString", api.status_string);
  return api;
}

}  // namespace

const char* cublas_status_string(cublasStatus_t st) {
  try {
    return cublas().status_string(st);
  } catch (const Error&) {
    return "(cuBLAS not loaded)";
  }
}

const CublasApi& cublas() {
  static const CublasApi api = load();  // thread-safe; a failure throws again on the next call
  return api;
}

}  // namespace nexus::cuda
