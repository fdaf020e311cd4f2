// The 256-bit SIMD kernel bodies (Q8_0, Q4_0 and float weights), included by
// gemm_avx2.cpp, which supplies `Isa::dot_u8s8` (four u8 x s8 products summed
// per int32 lane). (The AVX-512 kernels are gemm_quant_avx512.cpp and
// gemm_float_avx512.cpp.)
//
// Register tiles: one weight row against up to kTile tokens, the weight block
// loaded once per tile. Each (row, token) keeps two 8-lane float accumulators
// (even / odd blocks or column groups) so one FMA chain is not the
// bottleneck; the order of operations per (row, token) does not depend on the
// tile, so any n_tokens gives the same bits.
//
// Internal to the two variant files: everything is in an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/act_quant.h"
#include "kernels/weight_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/simd256.h"

namespace nexus {
namespace {

constexpr int kTile = 4;


// One block of one weight row against T tokens' blocks, into acc[0..T).
template <class Isa, int T>
inline void q8_0_block(const BlockQ8_0& wb, const BlockQ8Act* xb, int64_t stride, __m256* acc) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs));
  const __m256i aw = _mm256_sign_epi8(w, w);  // |w| as u8; the sign moves to x
  const float dw = half_to_float(wb.d);
  for (int t = 0; t < T; ++t) {
    const BlockQ8Act& x = xb[t * stride];
    const __m256i sx = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs)), w);
    const __m256 p = _mm256_cvtepi32_ps(Isa::dot_u8s8(aw, sx));
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x.d), p, acc[t]);
  }
}

template <class Isa, int T>
inline void q4_0_block(const BlockQ4_0& wb, const BlockQ8Act* xb, int64_t stride, __m256* acc) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.qs));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  // Values 0..15 as u8, in x's order: low nibbles are values 0..15, high ones 16..31.
  const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), low4), _mm_and_si128(raw, low4));
  const float dw = half_to_float(wb.d);
  for (int t = 0; t < T; ++t) {
    const BlockQ8Act& x = xb[t * stride];
    __m256i s = Isa::dot_u8s8(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs)));
    s = _mm256_sub_epi32(s, _mm256_setr_epi32(8 * x.qsum, 0, 0, 0, 0, 0, 0, 0));  // (q - 8) . x
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x.d), _mm256_cvtepi32_ps(s), acc[t]);
  }
}

// The two quantized weight types: their block and the per-block step.
template <class Isa>
struct Q8_0Weights {
  using Block = BlockQ8_0;
  template <int T>
  static void step(const Block& wb, const BlockQ8Act* xb, int64_t stride, __m256* acc) {
    q8_0_block<Isa, T>(wb, xb, stride, acc);
  }
};
template <class Isa>
struct Q4_0Weights {
  using Block = BlockQ4_0;
  template <int T>
  static void step(const Block& wb, const BlockQ8Act* xb, int64_t stride, __m256* acc) {
    q4_0_block<Isa, T>(wb, xb, stride, acc);
  }
};

// How far ahead of its loads a decode product prefetches the weight stream
// into L1 (see gemm_quant_avx512.cpp). On the Intel Xeon VM, synthetic
// TinyLlama-1.1B, 2 threads, these 256-bit kernels (NEXUS_KERNELS=avx2),
// tg64 at 0 / 1024 / 2048 / 3072 / 4096 bytes: Q4_0 12.7 / 25.2 / 32.4 /
// 33.2 / 34.1 t/s, Q8_0 14.6 / 23.2 / 24.8 / 25.3 / 24.2 t/s.
constexpr size_t kPrefetchBytes = 2048;

// A weight row against T tokens: even blocks into one set of accumulators,
// odd blocks into another, so two FMA chains run at once.
template <class Weights, int T>
inline void quant_tile(const typename Weights::Block* wb, int64_t n_blocks, const BlockQ8Act* x, int64_t stride,
                       float* y, int64_t ldy) {
  __m256 even[T], odd[T];
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < n_blocks; b += 2) {
    const char* p = reinterpret_cast<const char*>(wb + b) + kPrefetchBytes;
    for (size_t i = 0; i < 2 * sizeof(typename Weights::Block); i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
    Weights::template step<T>(wb[b], x + b, stride, even);
    Weights::template step<T>(wb[b + 1], x + b + 1, stride, odd);
  }
  if (b < n_blocks) Weights::template step<T>(wb[b], x + b, stride, even);
  for (int t = 0; t < T; ++t) y[t * ldy] = hsum(_mm256_add_ps(even[t], odd[t]));
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
  __m256 even[T], odd[T];
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm256_setzero_ps();
  const int64_t n16 = n_cols & ~int64_t{15}, n8 = n_cols & ~int64_t{7};
  int64_t c = 0;
  for (; c < n16; c += 16) {
    const __m256 w0 = Load::load(row, c), w1 = Load::load(row, c + 8);
    for (int t = 0; t < T; ++t) {
      even[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * n_cols + c), even[t]);
      odd[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + t * n_cols + c + 8), odd[t]);
    }
  }
  for (; c < n8; c += 8) {
    const __m256 w0 = Load::load(row, c);
    for (int t = 0; t < T; ++t) even[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * n_cols + c), even[t]);
  }
  for (int t = 0; t < T; ++t) {
    float s = hsum(_mm256_add_ps(even[t], odd[t]));
    for (int64_t i = n8; i < n_cols; ++i) s += Load::at(row, i) * x[t * n_cols + i];
    y[t * ldy] = s;
  }
}

// Row loop: full tiles of kTile tokens, then the remainder one token at a time.
template <class Weights>
void quant_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
                int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const typename Weights::Block*>(w + r * row_bytes);
    int64_t t = 0;
    for (; t + kTile <= n_tokens; t += kTile)
      quant_tile<Weights, kTile>(wb, n_blocks, x + t * n_blocks, n_blocks, y + t * ldy + r, ldy);
    for (; t < n_tokens; ++t) quant_tile<Weights, 1>(wb, n_blocks, x + t * n_blocks, n_blocks, y + t * ldy + r, ldy);
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


}  // namespace
}  // namespace nexus
