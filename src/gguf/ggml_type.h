// Tensor element types of GGUF files and their block layouts.
//
// Source: the GGUF specification (ggml docs/gguf.md, "ggml_type") and ggml's
// quantization block definitions. The numeric values are part of the file
// format and must not change. A quantized row of n values is n / block_size
// blocks of type_size bytes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace nexus {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

struct GgmlTypeTraits {
  std::string_view name;
  uint32_t block_size;  // values per block (1 for plain types)
  uint32_t type_size;   // bytes per block
};

// Traits of a type id as read from a file. Unknown ids return nullptr.
// Whether Nexus can compute with a type is the kernel table's business
// (kernels/weight_kernels.h: type_kernels()), not this file's.
const GgmlTypeTraits* ggml_type_traits(uint32_t type_id);

// Bytes taken by a row of n values; n must be a multiple of the block size
// (callers check with ggml_type_traits first).
size_t ggml_row_size(GgmlType type, uint64_t n);

std::string_view ggml_type_name(GgmlType type);
// Writes ggml_type_name(type) (GoogleTest prints test parameters with it).
std::ostream& operator<<(std::ostream& os, GgmlType type);

}  // namespace nexus
