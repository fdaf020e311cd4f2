// Quantization block layouts and half-precision conversions.
//
// Source: ggml's ggml-common.h (block_* structs), ggml-quants.c
// (dequantize_row_*) and the GGUF spec. Every struct has exactly ggml's
// bytes; "fp16" fields are IEEE binary16 bit patterns.
//
// Blocks of 32 values ("legacy" types):
//   Q8_0:   d + 32 x int8 q;                      x = d * q
//   Q4_0:   d + 16 bytes of nibbles;              x = d * (nibble - 8)
//   Q4_1:   d, m + 16 bytes of nibbles;           x = d * nibble + m
//   Q5_0:   d + 4 bytes qh + 16 bytes nibbles;    x = d * ((nibble | bit << 4) - 16)
//   Q5_1:   d, m + qh + nibbles;                  x = d * (nibble | bit << 4) + m
//   IQ4_NL: d + 16 bytes of nibbles;              x = d * kIq4nlValues[nibble]
//   In all of them byte j holds value j in its low nibble and value j + 16 in
//   its high one; for Q5_x bit j of qh (little-endian uint32) is value j's
//   fifth bit, bit j + 16 that of value j + 16.
// Super-blocks of 256 values (K-quants and IQ4_XS); sub-block scales:
//   Q2_K:   16 sub-blocks of 16: scales[i] = scale (low nibble) | min (high
//           nibble), 2-bit q; x = d * scale * q - dmin * min.
//   Q3_K:   16 sub-blocks of 16: 6-bit signed scales (minus 32) packed in
//           12 bytes, 2 low bits in qs, the third (inverted: set = +0) in
//           hmask; x = d * (scale - 32) * (q - (hbit ? 0 : 4)).
//   Q4_K:   8 sub-blocks of 32: 6-bit scale and 6-bit min packed in 12 bytes
//           (get_scale_min_k4), nibbles; x = d * scale * q - dmin * min.
//   Q5_K:   as Q4_K plus a fifth bit per value in qh.
//   Q6_K:   16 sub-blocks of 16: int8 scales, 4 low bits in ql, 2 high in qh;
//           x = d * scale * (q - 32).
//   IQ4_XS: 8 sub-blocks of 32: 6-bit scales (low 4 in scales_l, high 2 in
//           scales_h) minus 32, nibbles through kIq4nlValues.
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

struct BlockQ4_1 {
  uint16_t d, m;            // fp16 scale and minimum
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];            // fifth bits, little-endian uint32
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// A Q5_0 / Q5_1 block's fifth bits as one word: bit j is value j's, bit
// j + 16 value j + 16's (ggml reads qh as a little-endian uint32).
inline uint32_t q5_fifth_bits(const uint8_t (&qh)[4]) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof v);
  return v;
}

struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIq4Nl) == 18);

// The 16 non-uniform levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

constexpr int kQK_K = 256;  // values per super-block

struct BlockQ2_K {
  uint8_t scales[16];       // scale (low nibble) and min (high nibble) per sub-block of 16
  uint8_t qs[64];           // 2-bit quants
  uint16_t d, dmin;         // fp16 super-block scales of the scales and the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  uint8_t hmask[32];        // high bit of each quant
  uint8_t qs[64];           // low 2 bits
  uint8_t scales[12];       // 16 x 6-bit scales, packed
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];       // 8 x (6-bit scale, 6-bit min), packed
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[128];          // low 4 bits
  uint8_t qh[64];           // high 2 bits
  int8_t scales[16];        // per sub-block of 16
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;        // high 2 bits of the 8 scales
  uint8_t scales_l[4];      // low 4 bits of the 8 scales
  uint8_t qs[128];
};
static_assert(sizeof(BlockIq4Xs) == 136);

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
