// WeightView: a 2-D weight matrix as stored in a GGUF file, viewed in place.
//
// Math shape [n_rows, n_cols] = GGUF ne = {n_cols, n_rows}: each row holds
// n_cols values (contiguous, possibly in quantized blocks of the type's block
// size) and takes row_bytes bytes. A 1-D tensor (a norm weight) is one row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"

namespace nexus {

struct WeightView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t row_bytes = 0;
  // F32 only, optional: the same values repacked by pack_f32_panels
  // (kernels/f32_panels.h), which matmul() then reads instead of data.
  const float* panels = nullptr;

  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes; }
  // The data as F32, for norm weights (which GGUF stores as F32); nullptr otherwise.
  const float* f32() const { return type == GgmlType::F32 ? static_cast<const float*>(data) : nullptr; }
  size_t n_bytes() const { return row_bytes * static_cast<size_t>(n_rows); }
};

}  // namespace nexus
