// cuBLAS, loaded on first use with dlopen instead of linked: libcublasLt's
// static initialisers take ~84 MB of resident memory (and time) at process
// start, which every `nexus serve` on a machine without a GPU would pay.
// Only the entry points Nexus calls are resolved (names as exported by
// libcublas.so.13; the cublas_v2.h macros map cublasCreate -> cublasCreate_v2).
#pragma once

#include <cublas_v2.h>

namespace nexus::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  // cublasGemmEx is overloaded in C++: the C signature, spelled out.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                            const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                            cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Loads libcublas.so.13 (or libcublas.so) once. Throws nexus::Error naming
// the library and dlerror() when it or a symbol is missing.
const CublasApi& cublas();

}  // namespace nexus::cuda
