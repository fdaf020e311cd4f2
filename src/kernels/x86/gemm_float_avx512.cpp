// AVX-512 kernels for float weights (F32, F16, BF16), compiled with the same
// flags as gemm_avx512.cpp (src/CMakeLists.txt).
//
// Register tile: 16 (row, token) dot products at once, R rows x T tokens
// with R * T = 16 (16x1 for one token, 8x2 for two, 4x4 from three up,
// a third token padding the fourth). Each
// product is a single FMA chain over the columns, 16 at a time (the tail
// through a zero-filled masked load), so 16 independent chains hide the FMA
// latency. The 16 accumulators are then summed across their lanes together,
// by a transpose-and-add tree (4 levels, 45 instructions for 16 sums instead
// of a horizontal reduction per product): the small rows of tiny models
// (64 columns = 4 FMAs) were dominated by those reductions.
//
// Same bits whatever the batch: every (row, token) gets the same chain and
// the same lane tree (level k adds lane j to lane j + 16/2^k of its own
// accumulator) in any tile shape and any lane position, so n_tokens, the
// tile chosen and the thread's row range never change a result. A partial
// tile repeats its last row or token and drops those lanes.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/gemm_float_avx512.h"

namespace nexus {
namespace {

struct WideF32 {
  static constexpr int kElemBytes = 4;  // bytes per weight
  static __m512 load(const uint8_t* row, int64_t c) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c); }
  static __m512 load_tail(const uint8_t* row, int64_t c, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
  }
};
struct WideF16 {
  static constexpr int kElemBytes = 2;
  static __m512 load(const uint8_t* row, int64_t c) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  }
  static __m512 load_tail(const uint8_t* row, int64_t c, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * c));
  }
};
struct WideBF16 {
  static constexpr int kElemBytes = 2;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint8_t* row, int64_t c) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  }
  static __m512 load_tail(const uint8_t* row, int64_t c, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * c));
  }
};

// Lane sums of a[0..16): result lane i = sum of a[i]'s 16 lanes. Each level
// adds the upper half of what is left of an accumulator to its lower half.
inline __m512 sum16(__m512 a[16]) {
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i)  // 256-bit halves: rows 2i, 2i+1 -> 8 lanes each
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)  // 128-bit quarters: 4 lanes per row, rows in quarters
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i) {  // 64-bit pairs: 2 lanes per row
    const __m512d x = _mm512_castps_pd(c[2 * i]), y = _mm512_castps_pd(c[2 * i + 1]);
    d[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xDD));
  // s holds the rows in the order of its lanes: quarter q, element e -> row
  // 4e + q' where the levels above interleaved them; undo that permutation.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, s);
}

// R rows x T tokens, R * T = 16. rows[i] and xs[t] may repeat (padding).
// While it reads its R rows it prefetches the same columns of the R rows
// `ahead` bytes further on (the next tile's; past the matrix's end a
// prefetch touches nothing): with R streams at once the hardware
// prefetchers alone left decode waiting on DRAM. F16 TinyLlama-1.1B shape,
// 2 threads, tg32 (Intel Xeon VM): 12.2 -> 14.4 t/s (77% -> 92% of the
// DRAM bound); the same rows 1 or 2 KiB ahead instead: 12.9 / 11.0.
template <class Load, int R, int T>
inline __m512 tile(const uint8_t* const* rows, const float* const* xs, int64_t n_cols, int64_t ahead) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t n16 = n_cols & ~int64_t{15};
  for (int64_t c = 0; c < n16; c += 16) {
    if (((c * Load::kElemBytes) & 63) == 0) {  // once per 64-byte line of each row
      for (int i = 0; i < R; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(rows[i] + ahead + c * Load::kElemBytes), _MM_HINT_T0);
    }
    __m512 x[T];
    for (int t = 0; t < T; ++t) x[t] = _mm512_loadu_ps(xs[t] + c);
    for (int i = 0; i < R; ++i) {
      const __m512 w = Load::load(rows[i], c);
      for (int t = 0; t < T; ++t) acc[t * R + i] = _mm512_fmadd_ps(w, x[t], acc[t * R + i]);
    }
  }
  if (n16 < n_cols) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n_cols - n16)) - 1);
    __m512 x[T];
    for (int t = 0; t < T; ++t) x[t] = _mm512_maskz_loadu_ps(m, xs[t] + n16);
    for (int i = 0; i < R; ++i) {
      const __m512 w = Load::load_tail(rows[i], n16, m);
      for (int t = 0; t < T; ++t) acc[t * R + i] = _mm512_fmadd_ps(w, x[t], acc[t * R + i]);
    }
  }
  return sum16(acc);
}

// Lanes [t * R, t * R + nr) of s to y_t[0, nr), for t < nt: straight from the
// register (a spill and narrow reloads would stall store forwarding).
template <int R>
inline void store_tile(__m512 s, float* const* y, int64_t nt, int64_t nr) {
  if constexpr (R == 16) {
    _mm512_mask_storeu_ps(y[0], static_cast<__mmask16>((1u << nr) - 1), s);
  } else if constexpr (R == 8) {
    const __mmask8 m = static_cast<__mmask8>((1u << nr) - 1);
    _mm256_mask_storeu_ps(y[0], m, _mm512_castps512_ps256(s));
    if (nt > 1) _mm256_mask_storeu_ps(y[1], m, _mm512_extractf32x8_ps(s, 1));
  } else {
    static_assert(R == 4);
    const __mmask8 m = static_cast<__mmask8>((1u << nr) - 1);
    _mm_mask_storeu_ps(y[0], m, _mm512_castps512_ps128(s));
    if (nt > 1) _mm_mask_storeu_ps(y[1], m, _mm512_extractf32x4_ps(s, 1));
    if (nt > 2) _mm_mask_storeu_ps(y[2], m, _mm512_extractf32x4_ps(s, 2));
    if (nt > 3) _mm_mask_storeu_ps(y[3], m, _mm512_extractf32x4_ps(s, 3));
  }
}

// Rows [r0, r1) (at most 16; R at a time) against tokens [t0, t0 + T),
// both clamped: a partial tile repeats its last row or token.
template <class Load, int R, int T>
inline void panel_tokens(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
                         int64_t t0, int64_t n_tokens, float* y, int64_t ldy) {
  const float* xs[T];
  for (int t = 0; t < T; ++t) xs[t] = x + std::min<int64_t>(t0 + t, n_tokens - 1) * n_cols;
  const int64_t nt = std::min<int64_t>(T, n_tokens - t0);
  for (int64_t r = r0; r < r1; r += R) {
    const uint8_t* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w + std::min<int64_t>(r + i, r1 - 1) * row_bytes;
    float* ys[T];
    for (int t = 0; t < T; ++t) ys[t] = y + (t0 + t) * ldy + r;
    const int64_t ahead = R * static_cast<int64_t>(row_bytes);
    store_tile<R>(tile<Load, R, T>(rows, xs, n_cols, ahead), ys, nt, std::min<int64_t>(R, r1 - r));
  }
}

// Panels of 16 rows, each against every token before the next panel, so a
// panel is read from memory once and from L1/L2 for the other tokens.
template <class Load>
void float_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
                int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t p = r0; p < r1; p += 16) {
    const int64_t p1 = std::min<int64_t>(p + 16, r1);
    int64_t t = 0;
    for (; t + 3 <= n_tokens; t += 4) panel_tokens<Load, 4, 4>(w, row_bytes, p, p1, n_cols, x, t, n_tokens, y, ldy);
    if (n_tokens - t == 2) panel_tokens<Load, 8, 2>(w, row_bytes, p, p1, n_cols, x, t, n_tokens, y, ldy);
    else if (n_tokens - t == 1) panel_tokens<Load, 16, 1>(w, row_bytes, p, p1, n_cols, x, t, n_tokens, y, ldy);
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_f32_avx512) {
  float_rows<WideF32>(w, row_bytes, r0, r1, n_cols, static_cast<const float*>(x), n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_f16_avx512) {
  float_rows<WideF16>(w, row_bytes, r0, r1, n_cols, static_cast<const float*>(x), n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_bf16_avx512) {
  float_rows<WideBF16>(w, row_bytes, r0, r1, n_cols, static_cast<const float*>(x), n_tokens, y, ldy);
}

}  // namespace nexus
