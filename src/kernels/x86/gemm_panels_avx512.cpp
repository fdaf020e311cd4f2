// The F32 panel kernel (kernels/f32_panels.h), AVX-512 (compiled with the
// flags of gemm_avx512.cpp, src/CMakeLists.txt).
//
// A panel holds 16 rows column by column, so one 16-lane register is column c
// of 16 rows and y[t, 16 rows] += W[:, c] * x[t, c] is one FMA with x[t, c]
// broadcast: no horizontal sums at all, which is what short rows need (a
// 64-value row is 4 FMAs; its horizontal sum cost as much again).
//
// Tile: P panels x T tokens, at least 8 accumulators (8 FMA chains in
// flight against a 4-cycle FMA latency at 2 FMAs per cycle): P * T = 8 for 1
// and 2 tokens, 12 to 16 for 3 to 8, where a column costs P weight loads and T
// broadcasts for P * T FMAs and 8 accumulators left the load ports, not the
// FMAs, setting the pace (32000x64 at 8 tokens, 1 thread: 241 -> 204 us).
// Tokens go in blocks of 8, then one block of the 1 to 7 left: one pass over
// the weight per block, however many tokens it holds (a 6-token verify run as
// 4 + 2 paid for two passes: the output layer of TinyLLama-v0 took longer for
// 6 tokens than for 8). Panels go in groups of 8 (32 KiB of a 64-column
// weight, kept in L1/L2 for every token block), P at a time, the leftover one
// by one.
// Every (row, token) is the same chain, acc = fma(W[r, c], x[t, c], acc) for
// c = 0, 1, ..., n_cols - 1 from zero, in every tile shape: results never
// depend on the batch or on the panel range a thread was given.
#include <immintrin.h>

#include <algorithm>

#include "kernels/f32_panels.h"

namespace nexus {
namespace {

template <int P, int T>
inline void tile(const float* panels, int64_t p, int64_t n_rows, int64_t n_cols, const float* x, int64_t t0,
                 float* y, int64_t ldy) {
  __m512 acc[P][T];
  for (int i = 0; i < P; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  const float* w = panels + p * n_cols * kPanelRows;
  const float* xt = x + t0 * n_cols;
  for (int64_t c = 0; c < n_cols; ++c) {
    __m512 wc[P];
    for (int i = 0; i < P; ++i) {
      wc[i] = _mm512_loadu_ps(w + (i * n_cols + c) * kPanelRows);
      // Keep the column in a register: left to itself GCC folds the load
      // into each of the T FMAs (T loads instead of one), and at 4 tokens
      // the load ports, not the FMAs, then set the pace (32000x64 weight,
      // 1 thread: 4 tokens took 292 us, more than 8 tokens' 234).
      asm("" : "+v"(wc[i]));
    }
    for (int t = 0; t < T; ++t) {
      const __m512 xc = _mm512_set1_ps(xt[t * n_cols + c]);
      for (int i = 0; i < P; ++i) acc[i][t] = _mm512_fmadd_ps(wc[i], xc, acc[i][t]);
    }
  }
  for (int i = 0; i < P; ++i) {
    const int64_t r = (p + i) * kPanelRows;
    const __mmask16 m = static_cast<__mmask16>((1u << std::min<int64_t>(kPanelRows, n_rows - r)) - 1);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r, m, acc[i][t]);
  }
}

// Panels [p0, p1) against tokens [t0, t0 + T).
template <int T>
inline void token_block(const float* panels, int64_t p0, int64_t p1, int64_t n_rows, int64_t n_cols, const float* x,
                        int64_t t0, float* y, int64_t ldy) {
  constexpr int P = T >= 3 ? 16 / T : 8 / T;  // at most 16 accumulators + P columns + a broadcast: 32 registers
  int64_t p = p0;
  for (; p + P <= p1; p += P) tile<P, T>(panels, p, n_rows, n_cols, x, t0, y, ldy);
  for (; p < p1; ++p) tile<1, T>(panels, p, n_rows, n_cols, x, t0, y, ldy);
}

// token_block<T> for T = 1..8, by T (index 0 unused).
using TokenBlockFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, const float*, int64_t, float*, int64_t);
constexpr TokenBlockFn kTokenBlock[9] = {nullptr,        token_block<1>, token_block<2>, token_block<3>, token_block<4>,
                                         token_block<5>, token_block<6>, token_block<7>, token_block<8>};

}  // namespace

void gemm_f32_panels_avx512(const float* panels, int64_t p0, int64_t p1, int64_t n_rows, int64_t n_cols,
                            const float* x, int64_t n_tokens, float* y, int64_t ldy) {
  constexpr int64_t kGroup = 8;
  for (int64_t g = p0; g < p1; g += kGroup) {
    const int64_t g1 = std::min(g + kGroup, p1);
    for (int64_t t = 0; t < n_tokens; t += 8)
      kTokenBlock[std::min<int64_t>(8, n_tokens - t)](panels, g, g1, n_rows, n_cols, x, t, y, ldy);
  }
}

}  // namespace nexus
