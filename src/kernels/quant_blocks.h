// Quantization block layouts and half-precision conversions.
//
// Source: ggml's ggml-common.h (block_q8_0, block_q4_0) and the GGUF spec.
//   Q8_0: 32 values = fp16 scale d + 32 x int8 q;          x = d * q
//   Q4_0: 32 values = fp16 scale d + 16 bytes of nibbles;  x = d * (nibble - 8),
//         byte j holds value j in its low nibble and value j + 16 in its high one.
//   F16:  IEEE 754 binary16.  BF16: the upper 16 bits of an IEEE binary32.
#pragma once

#include <cstdint>
#include <cstring>

namespace nexus {

constexpr int kQK8_0 = 32;
constexpr int kQK4_0 = 32;

struct BlockQ8_0 {
  uint16_t d;          // fp16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;               // fp16 scale
  uint8_t qs[kQK4_0 / 2];   // nibbles
};
static_assert(sizeof(BlockQ4_0) == 18);

// IEEE binary16 -> binary32, exact for every input (subnormals, inf, NaN).
float fp16_to_fp32(uint16_t h);
// binary32 -> binary16, round to nearest even.
uint16_t fp32_to_fp16(float f);
// n values at once through F16C (x86-64-v3, the build's baseline): the same
// results as fp32_to_fp16 except NaN payloads (any NaN stays a NaN).
void fp32_to_fp16_n(const float* src, uint16_t* dst, int64_t n);

inline float bf16_to_fp32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// binary32 -> bfloat16, round to nearest even (NaN stays NaN).
uint16_t fp32_to_bf16(float f);

}  // namespace nexus
