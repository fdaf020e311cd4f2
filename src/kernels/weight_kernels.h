// The kernel table: one row per weight type (the shape of ggml's type
// traits), each naming how a row is dequantized, which activation format
// its dot product takes, and its matrix-product kernel per instruction set.
// Adding a weight type means one row (weight_kernels.cpp) and its kernel
// files; nothing else dispatches on the type.
//
// Every product kernel computes, for weight rows r in [r0, r1) and tokens t
// in [0, n_tokens):
//
//   y[t * ldy + r] = dot(W row r, x row t)
//
// w: the weight's rows, row_bytes apart (GGUF layout, tensor.h); n_cols: the
// values per row (a multiple of the type's block size). x: the activations
// in the row's ActFormat:
//   F32:   float [n_tokens, n_cols]                       (F32, F16, BF16)
//   Q8_32: BlockQ8Act [n_tokens, n_cols / 32] (act_quant.h; Q8_0, Q4_0, Q4_1,
//          Q5_0, Q5_1, IQ4_NL: ggml's vec_dot_type Q8_0 / Q8_1)
//   Q8_K:  BlockQ8K [n_tokens, n_cols / 256] (K-quants, IQ4_XS: ggml's Q8_K)
// Every kernel gives each (row, token) the same bits whatever n_tokens, r0
// and r1 are, so prefill and decode agree on one machine.
//
// Instruction sets, from the portable reference up: a row's entry for an
// instruction set may be empty; pick_gemm() then takes the nearest one below
// it (never another type's kernel), down to the reference, which every row
// has.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gguf/ggml_type.h"

namespace nexus {

enum class ActFormat : uint8_t { F32, Q8_32, Q8_K };

// Values per activation block (1 for F32).
int64_t act_block_size(ActFormat f);
// Bytes of one token's activations of n_cols values in format f.
size_t act_row_bytes(ActFormat f, int64_t n_cols);

using GemmFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x,
                        int64_t n_tokens, float* y, int64_t ldy);
// Declares a kernel with the GemmFn signature (the per-ISA headers use it).
#define NEXUS_GEMM_KERNEL(name)                                                                        \
  void name(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x, \
            int64_t n_tokens, float* y, int64_t ldy)
// n values (a multiple of the block size) of one stored row -> float32.
using DequantRowFn = void (*)(const void* src, float* dst, int64_t n);

// Ordered: each needs everything of the ones before it on x86 (AMX and the
// AVX-512 prefill kernels run on AVX-512 VNNI CPUs only).
enum class Isa : uint8_t {
  Ref,            // portable C++
  Avx2,           // AVX2 + FMA + F16C: decode (and small batches)
  Avx512,         // AVX-512 F/BW/VL/DQ + VNNI: decode
  Avx512Prefill,  // AVX-512 VNNI register-blocked matrix-matrix (prefill)
  Amx,            // AMX-INT8 tiles (prefill)
};
constexpr size_t kIsaCount = 5;
// "ref", "avx2", "avx512_vnni", "avx512_prefill", "amx" (NEXUS_KERNELS' names).
std::string_view isa_name(Isa isa);
// Whether this CPU (and OS, for AMX's tile state) runs kernels of `isa`.
bool cpu_supports(Isa isa);

struct TypeKernels {
  GgmlType type;
  ActFormat act;
  DequantRowFn dequantize;             // always set
  std::array<GemmFn, kIsaCount> gemm;  // indexed by Isa; gemm[Ref] always set
};

// The row of `type`; nullptr for a type Nexus cannot compute with.
const TypeKernels* type_kernels(GgmlType type);
// Every row, in table order.
std::span<const TypeKernels> all_type_kernels();
// The names of every type with a row, in table order ("F32, F16, ...").
std::string supported_weight_types();

// The kernel of `isa` for this row, or the nearest instruction set below it
// that the row has (down to Ref).
GemmFn pick_gemm(const TypeKernels& k, Isa isa);
// Which instruction set pick_gemm(k, isa) resolves to.
Isa picked_isa(const TypeKernels& k, Isa isa);

}  // namespace nexus
