// The inner kernels behind matmul(), one table per instruction set, chosen
// once by CPUID (gemm_kernels()). All compute, for rows r in [r0, r1) of a
// weight and tokens t in [0, n_tokens):
//
//   y[t * ldy + r] = dot(W row r, x row t)
//
// Quantized weights (Q8_0, Q4_0) take activations quantized to BlockQ8Act
// ([n_tokens, n_blocks] blocks) and sum in int32 per block, scaled in float.
// Float weights (F32, F16, BF16) take float32 activations [n_tokens, n_cols].
// Every kernel gives each (row, token) the same result whatever n_tokens is,
// so prefill and decode agree bit for bit on one machine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/act_quant.h"

namespace nexus {

using GemmQ8Fn = void (*)(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks,
                          const BlockQ8Act* x, int64_t n_tokens, float* y, int64_t ldy);
using GemmFFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols,
                         const float* x, int64_t n_tokens, float* y, int64_t ldy);

struct GemmKernels {
  const char* name;
  GemmQ8Fn q8_0;
  GemmQ8Fn q4_0;
  GemmFFn f32;
  GemmFFn f16;
  GemmFFn bf16;
};

// The portable reference (plain C++), what the others are tested against.
const GemmKernels& gemm_kernels_ref();
// AVX2 + FMA + F16C; nullptr when not compiled in.
const GemmKernels* gemm_kernels_avx2();
// AVX-512 (F/BW/VL) with VNNI; nullptr when not compiled in.
const GemmKernels* gemm_kernels_avx512_vnni();
// AMX-INT8 for Q8_0/Q4_0 (prefill; float types as AVX-512); needs the OS's
// consent (cpu_features().amx_int8).
const GemmKernels* gemm_kernels_amx();
// AVX-512 VNNI register-blocked GEMM for Q8_0/Q4_0 prefill (16 rows x 12
// tokens per tile; float types as AVX-512), for CPUs without AMX.
const GemmKernels* gemm_kernels_avx512_prefill();
// The best vector table this CPU runs (for decode); matmul() switches to the
// AMX table for 16 or more tokens (without AMX: the AVX-512 prefill table,
// from 8 tokens; see KernelChoice in matmul.cpp).
// NEXUS_KERNELS=ref|avx2|avx512_vnni forces one table for both;
// NEXUS_KERNELS=avx512_prefill forces the AVX-512 prefill table for prefill.
const GemmKernels& gemm_kernels();

}  // namespace nexus
