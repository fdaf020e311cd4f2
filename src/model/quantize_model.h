// Quantizing a whole GGUF model file to a mix (model/quant_mix.h): what
// `nexus quantize` does, the way llama-quantize does it without an
// importance matrix.
//
// The output file (GgufWriter, GGUF v3):
//   - metadata: every key of the input in its order, less general.alignment
//     (the writer puts it last, with the input's value), the split.* keys and
//     the two below, which are then appended as llama.cpp appends them:
//     general.quantization_version = 2 (u32) and general.file_type = the
//     mix's LLAMA_FTYPE value (u32);
//   - tensors in llama.cpp's processing order: the ones outside the layers
//     first, then layer by layer ("blk.N."), by name within each group;
//     data aligned to the input's general.alignment (default 32).
// Each converted matrix is read row by row (F32 as it is; F16, BF16 and, with
// allow_requantize, quantized types through dequantize_row) and written with
// quantize_row_ref, so it holds the same bytes llama-quantize writes for the
// same input. Tensors that keep their type are copied byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "model/quant_mix.h"

namespace nexus {

struct QuantizeOptions {
  const QuantMix* mix = nullptr;
  std::optional<GgmlType> output_type;      // output.weight (and a tied token_embd.weight)
  std::optional<GgmlType> token_embd_type;  // token_embd.weight
  bool allow_requantize = false;            // convert tensors that are already quantized
  int32_t n_threads = 0;                    // 0 = hardware concurrency
};

struct TensorPlan {
  const TensorInfo* src = nullptr;
  GgmlType type = GgmlType::F32;  // as written
  bool convert = false;           // false: copied unchanged
  uint64_t n_bytes = 0;           // bytes written
  std::string fallback;           // why the row length changed the mix's choice ("" if it did not)
};

struct QuantizePlan {
  std::vector<TensorPlan> tensors;         // in the output's order
  std::vector<std::string> requantized;    // quantized input tensors that get converted
};

// Decides every tensor's type. Throws nexus::Error (nothing written yet) for:
// a split model; a quantized tensor to convert without allow_requantize
// (naming it, its type and the option); an input type that cannot be
// dequantized; an --output-type / --token-embedding-type whose block does
// not divide that tensor's rows.
QuantizePlan plan_quantization(const GgufFile& in, const QuantizeOptions& opt);

struct QuantizeTotals {
  uint64_t data_in = 0, data_out = 0;  // tensor data bytes (no header, no padding)
  uint64_t file_out = 0;               // bytes of the written file
  int32_t n_converted = 0, n_copied = 0;
};

// Called on the calling thread before (done = false) and after (done = true)
// each tensor of plan.tensors, by index.
using QuantizeProgress = std::function<void(size_t index, bool done)>;

// Writes `out` atomically (a temporary file renamed on success; on any error
// nothing is left under `out` or the temporary name). Rows are converted on
// opt.n_threads threads. Throws nexus::Error on an I/O error.
QuantizeTotals write_quantized(const GgufFile& in, const QuantizePlan& plan, const QuantizeOptions& opt,
                               const std::string& out, const QuantizeProgress& progress = {});

}  // namespace nexus
