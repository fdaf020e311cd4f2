// The F32 panel kernel (kernels/f32_panels.h) for AVX2 + FMA, the baseline
// build; the AVX-512 one is gemm_panels_avx512.cpp.
//
// A 16-row panel column is two 8-lane registers, so y[t, 16 rows] +=
// W[:, c] * x[t, c] is two FMAs with x[t, c] broadcast: no horizontal sums,
// which is what short rows need (TinyLLama-v0's output layer has 64 columns;
// the row-major AVX2 kernel spends as long on each (row, token)'s final sum
// as on its 8 FMAs).
//
// Tile: P panels x T tokens with P * T = 4, i.e. 8 accumulators, 8 FMA
// chains in flight (3 tokens: one panel, 6). Tokens go in blocks of 4, then
// one block of the 1 to 3 left (one pass over the weight each); panels in
// groups of 8, P at a time. Every (row, token) is the same chain, acc = fma(W[r, c],
// x[t, c], acc) for c = 0, 1, ..., n_cols - 1 from zero, in every tile shape
// and in the AVX-512 kernel too: results depend neither on the batch, nor on
// the panel range a thread was given, nor on which of the two kernels ran.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/f32_panels.h"

namespace nexus {
namespace {

template <int P, int T>
inline void tile(const float* panels, int64_t p, int64_t n_rows, int64_t n_cols, const float* x, int64_t t0,
                 float* y, int64_t ldy) {
  __m256 lo[P][T], hi[P][T];  // rows 0..7 and 8..15 of each panel
  for (int i = 0; i < P; ++i)
    for (int t = 0; t < T; ++t) lo[i][t] = hi[i][t] = _mm256_setzero_ps();
  const float* w = panels + p * n_cols * kPanelRows;
  const float* xt = x + t0 * n_cols;
  for (int64_t c = 0; c < n_cols; ++c) {
    __m256 wlo[P], whi[P];
    for (int i = 0; i < P; ++i) {
      const float* wc = w + (i * n_cols + c) * kPanelRows;
      wlo[i] = _mm256_loadu_ps(wc);
      whi[i] = _mm256_loadu_ps(wc + 8);
      // Several tokens: keep the column in registers (GCC would otherwise
      // fold the load into each token's FMA, T loads instead of one, as in
      // gemm_panels_avx512.cpp). One token uses it once: a memory operand is
      // as good, and 4 panels' columns would not fit in the 16 registers.
      if constexpr (T > 1) asm("" : "+x"(wlo[i]), "+x"(whi[i]));
    }
    for (int t = 0; t < T; ++t) {
      const __m256 xc = _mm256_broadcast_ss(xt + t * n_cols + c);
      for (int i = 0; i < P; ++i) {
        lo[i][t] = _mm256_fmadd_ps(wlo[i], xc, lo[i][t]);
        hi[i][t] = _mm256_fmadd_ps(whi[i], xc, hi[i][t]);
      }
    }
  }
  for (int i = 0; i < P; ++i) {
    const int64_t r = (p + i) * kPanelRows;
    const int64_t n = std::min<int64_t>(kPanelRows, n_rows - r);
    for (int t = 0; t < T; ++t) {
      float* yr = y + (t0 + t) * ldy + r;
      if (n == kPanelRows) {
        _mm256_storeu_ps(yr, lo[i][t]);
        _mm256_storeu_ps(yr + 8, hi[i][t]);
      } else {  // the last panel of a weight whose rows are not a multiple of 16
        alignas(32) float buf[kPanelRows];
        _mm256_store_ps(buf, lo[i][t]);
        _mm256_store_ps(buf + 8, hi[i][t]);
        std::memcpy(yr, buf, static_cast<size_t>(n) * sizeof(float));
      }
    }
  }
}

// Panels [p0, p1) against tokens [t0, t0 + T).
template <int T>
inline void token_block(const float* panels, int64_t p0, int64_t p1, int64_t n_rows, int64_t n_cols, const float* x,
                        int64_t t0, float* y, int64_t ldy) {
  constexpr int P = 4 / T;
  int64_t p = p0;
  for (; p + P <= p1; p += P) tile<P, T>(panels, p, n_rows, n_cols, x, t0, y, ldy);
  for (; p < p1; ++p) tile<1, T>(panels, p, n_rows, n_cols, x, t0, y, ldy);
}

// token_block<T> for T = 1..4, by T (index 0 unused).
using TokenBlockFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, const float*, int64_t, float*, int64_t);
constexpr TokenBlockFn kTokenBlock[5] = {nullptr, token_block<1>, token_block<2>, token_block<3>, token_block<4>};

}  // namespace

void gemm_f32_panels_avx2(const float* panels, int64_t p0, int64_t p1, int64_t n_rows, int64_t n_cols,
                          const float* x, int64_t n_tokens, float* y, int64_t ldy) {
  constexpr int64_t kGroup = 8;
  for (int64_t g = p0; g < p1; g += kGroup) {
    const int64_t g1 = std::min(g + kGroup, p1);
    for (int64_t t = 0; t < n_tokens; t += 4)
      kTokenBlock[std::min<int64_t>(4, n_tokens - t)](panels, g, g1, n_rows, n_cols, x, t, y, ldy);
  }
}

}  // namespace nexus
