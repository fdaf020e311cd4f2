// Activations quantized to 8 bits for integer dot products with Q8_0 / Q4_0
// weights (ggml's "vec_dot_type" Q8_0 for both).
//
// A row of n floats becomes n / 32 blocks. Per block, following ggml's
// quantize_row_q8_0: d = amax / 127, q = round(x / d); d is then rounded to
// fp16 as ggml stores it, so Nexus rounds like the reference. qsum = sum(q),
// which lets a Q4_0 kernel use its nibbles (0..15) unsigned and subtract
// 8 * qsum instead of re-centring every value.
#pragma once

#include <cstdint>

namespace nexus {

struct BlockQ8Act {
  float d;        // scale (an fp16 value, kept as float)
  int32_t qsum;   // sum of qs
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8Act) == 40);

// x: n floats (n a multiple of 32) -> n / 32 blocks.
void quantize_act_q8(const float* x, BlockQ8Act* out, int64_t n);

// The same, bit for bit, with AVX-512 (x86/act_quant_avx512.cpp): call only
// when cpu_features().avx512_vnni (matmul() does).
void quantize_act_q8_avx512(const float* x, BlockQ8Act* out, int64_t n);

}  // namespace nexus
