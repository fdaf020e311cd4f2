// Q4_1, Q5_0 and Q5_1 reference quantizers (ggml's quantize_row_q4_1_ref,
// quantize_row_q5_0_ref, quantize_row_q5_1_ref): one pass per block of 32,
// no search. Byte j holds value j in its low nibble and value j + 16 in its
// high one; for Q5_x, bit j of qh is value j's fifth bit.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "model/quantize_types.h"

namespace nexus::quant {
namespace {

constexpr int kBlock = 32;
constexpr int kHalf = kBlock / 2;

void min_max(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < kBlock; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// ggml rounds a code half up as (int8_t)(v + 0.5f) (Q5_1: uint8_t): v >= 0
// here, so truncation rounds, and the 8-bit wrap never bites for the values
// that occur (0..nmax + 1). Through int first: a float outside the target
// type's range is undefined behaviour in C++, an int outside it is not.
int code_int8(float v) { return static_cast<int8_t>(static_cast<int>(v)); }
int code_uint8(float v) { return static_cast<uint8_t>(static_cast<int>(v)); }

void put_fifth_bits(uint32_t qh, uint8_t out[4]) { std::memcpy(out, &qh, 4); }

}  // namespace

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    float min, max;
    min_max(x, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kHalf; ++j) {
      const float v0 = (x[j] - min) * id, v1 = (x[j + kHalf] - min) * id;
      const int q0 = std::min(15, code_int8(v0 + 0.5f));
      const int q1 = std::min(15, code_int8(v1 + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    // As Q4_0: d = m / -16 for the signed value m of largest magnitude, so m
    // lands on code 0 exactly and the other sign gets codes 1..31.
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < kBlock; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        m = x[j];
      }
    const float d = m / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = std::min(31, code_int8(x[j] * id + 16.5f));
      const int q1 = std::min(31, code_int8(x[j + kHalf] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xf) | ((q1 & 0xf) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kHalf);
    }
    put_fifth_bits(qh, y[i].qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    float min, max;
    min_max(x, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      // No clamp in ggml: (max - min) * id rounds to at most 31.5, truncated to 31.
      const int q0 = code_uint8((x[j] - min) * id + 0.5f);
      const int q1 = code_uint8((x[j + kHalf] - min) * id + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xf) | ((q1 & 0xf) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kHalf);
    }
    put_fifth_bits(qh, y[i].qh);
  }
}

}  // namespace nexus::quant
