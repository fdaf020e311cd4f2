// The x86 SIMD kernel bodies, shared by the instruction-set variants
// (gemm_avx2.cpp, gemm_avx512.cpp), which include this file once each and
// supply `Isa::dot_u8s8` (four u8 x s8 products summed per int32 lane).
//
// Register tiles: one weight row against up to kTile tokens, the weight block
// loaded once per tile. Each (row, token) keeps two 8-lane float accumulators
// (even / odd blocks) so the FMA chain is not the bottleneck; the order of
// operations per (row, token) does not depend on the tile, so any n_tokens
// gives the same bits.
//
// Internal to the two variant files: everything is in an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/gemm_kernels.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

constexpr int kTile = 4;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

template <class Isa, int T>
void q8_0_tile(const BlockQ8_0* wb, int64_t n_blocks, const BlockQ8Act* x, int64_t n_tokens_stride, float* y,
               int64_t ldy) {
  __m256 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs));
    const __m256i aw = _mm256_sign_epi8(w, w);  // |w| as u8; the sign moves to x
    const float dw = half_to_float(wb[b].d);
    for (int t = 0; t < T; ++t) {
      const BlockQ8Act& xb = x[t * n_tokens_stride + b];
      const __m256i sx = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs)), w);
      const __m256 p = _mm256_cvtepi32_ps(Isa::dot_u8s8(aw, sx));
      acc[t][b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d), p, acc[t][b & 1]);
    }
  }
  for (int t = 0; t < T; ++t) y[t * ldy] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
}

template <class Isa, int T>
void q4_0_tile(const BlockQ4_0* wb, int64_t n_blocks, const BlockQ8Act* x, int64_t n_tokens_stride, float* y,
               int64_t ldy) {
  __m256 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const __m128i low4 = _mm_set1_epi8(0x0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[b].qs));
    // Values 0..15 as u8, in x's order: low nibbles are values 0..15, high ones 16..31.
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), low4), _mm_and_si128(raw, low4));
    const float dw = half_to_float(wb[b].d);
    for (int t = 0; t < T; ++t) {
      const BlockQ8Act& xb = x[t * n_tokens_stride + b];
      __m256i s = Isa::dot_u8s8(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs)));
      s = _mm256_sub_epi32(s, _mm256_setr_epi32(8 * xb.qsum, 0, 0, 0, 0, 0, 0, 0));  // (q - 8) . x
      acc[t][b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d), _mm256_cvtepi32_ps(s), acc[t][b & 1]);
    }
  }
  for (int t = 0; t < T; ++t) y[t * ldy] = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
}

struct LoadF32 {
  static __m256 load(const uint8_t* row, int64_t c) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c); }
  static float at(const uint8_t* row, int64_t c) { float f; std::memcpy(&f, row + 4 * c, 4); return f; }
};
struct LoadF16 {
  static __m256 load(const uint8_t* row, int64_t c) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  }
  static float at(const uint8_t* row, int64_t c) { uint16_t h; std::memcpy(&h, row + 2 * c, 2); return half_to_float(h); }
};
struct LoadBF16 {
  static __m256 load(const uint8_t* row, int64_t c) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float at(const uint8_t* row, int64_t c) { uint16_t h; std::memcpy(&h, row + 2 * c, 2); return bf16_to_fp32(h); }
};

template <class Load, int T>
void float_tile(const uint8_t* row, int64_t n_cols, const float* x, float* y, int64_t ldy) {
  __m256 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const int64_t n8 = n_cols & ~int64_t{7};
  for (int64_t c = 0; c < n8; c += 8) {
    const __m256 w = Load::load(row, c);
    for (int t = 0; t < T; ++t)
      acc[t][(c >> 3) & 1] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + t * n_cols + c), acc[t][(c >> 3) & 1]);
  }
  for (int t = 0; t < T; ++t) {
    float s = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
    for (int64_t c = n8; c < n_cols; ++c) s += Load::at(row, c) * x[t * n_cols + c];
    y[t * ldy] = s;
  }
}

// Row loop: full tiles of kTile tokens, then the remainder one token at a time.
template <class Isa>
void q8_0_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
               int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const BlockQ8_0*>(w + r * row_bytes);
    int64_t t = 0;
    for (; t + kTile <= n_tokens; t += kTile) q8_0_tile<Isa, kTile>(wb, n_blocks, x + t * n_blocks, n_blocks, y + t * ldy + r, ldy);
    for (; t < n_tokens; ++t) q8_0_tile<Isa, 1>(wb, n_blocks, x + t * n_blocks, n_blocks, y + t * ldy + r, ldy);
  }
}

template <class Isa>
void q4_0_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
               int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const BlockQ4_0*>(w + r * row_bytes);
    int64_t t = 0;
    for (; t + kTile <= n_tokens; t += kTile) q4_0_tile<Isa, kTile>(wb, n_blocks, x + t * n_blocks, n_blocks, y + t * ldy + r, ldy);
    for (; t < n_tokens; ++t) q4_0_tile<Isa, 1>(wb, n_blocks, x + t * n_blocks, n_blocks, y + t * ldy + r, ldy);
  }
}

template <class Load>
void float_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
                int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    int64_t t = 0;
    for (; t + kTile <= n_tokens; t += kTile) float_tile<Load, kTile>(row, n_cols, x + t * n_cols, y + t * ldy + r, ldy);
    for (; t < n_tokens; ++t) float_tile<Load, 1>(row, n_cols, x + t * n_cols, y + t * ldy + r, ldy);
  }
}

template <class Isa>
GemmKernels make_kernels(const char* name) {
  return GemmKernels{name, q8_0_rows<Isa>, q4_0_rows<Isa>, float_rows<LoadF32>, float_rows<LoadF16>, float_rows<LoadBF16>};
}

}  // namespace
}  // namespace nexus
