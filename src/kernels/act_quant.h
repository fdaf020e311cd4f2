// Activations quantized to 8 bits for integer dot products with quantized
// weights: BlockQ8Act (blocks of 32) for the 32-value types (ggml's
// vec_dot_type Q8_0 / Q8_1), BlockQ8K (super-blocks of 256 with sums per 16)
// for the K-quants and IQ4_XS (ggml's Q8_K).
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

// ggml's block_q8_K, following quantize_row_q8_K_ref: per 256 values, m = the
// value of largest magnitude (signed), iscale = -127 / m, q = min(127,
// round(iscale * x)), d = 1 / iscale (float32, not rounded to fp16);
// bsums[i] = sum of q over values 16 i .. 16 i + 15. An all-zero block has
// d = 0 and q = 0.
struct BlockQ8K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8K) == 292);

// x: n floats (n a multiple of 256) -> n / 256 blocks.
void quantize_act_q8k(const float* x, BlockQ8K* out, int64_t n);

}  // namespace nexus
