// Reference conversion of float32 rows to the weight types Nexus computes
// with, for writing model files (nexus synth) and for benchmarks.
//
// Source: ggml's reference quantizers (ggml-quants.c, quantize_row_q8_0_ref
// and quantize_row_q4_0_ref), reproduced arithmetically so files match what
// llama.cpp's quantizer writes for the same floats:
//   Q8_0 per block of 32: amax = max |x|, d = amax / 127, id = 1/d (0 if d = 0),
//        q = roundf(x * id); stored d is fp16(d).
//   Q4_0 per block of 32: m = the value of largest magnitude (signed; the
//        first one on ties), d = m / -8, id = 1/d (0 if d = 0),
//        q = min(15, trunc(x * id + 8.5)); value j goes to the low nibble of
//        byte j, value j + 16 to its high nibble; stored d is fp16(d).
//   F16 / BF16: round to nearest even (kernels/quant_blocks.h).
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace nexus {

// Writes n values of src as one row of `type` to dst, which must hold
// ggml_row_size(type, n) bytes. n must be a multiple of the type's block
// size. Throws nexus::Error for a type other than F32, F16, BF16, Q8_0, Q4_0
// or an n that is not a multiple of its block size.
void quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace nexus
