// NextPanel: software prefetch of the next 16-row weight panel while the
// prefill kernels (gemm_prefill_avx512.cpp, gemm_kquants_prefill_avx512.cpp)
// compute the current one. In prefill the weights stream from DRAM once per
// step; fetching the next panel's cache lines a few per block step, rather
// than stalling in pack_panel's loads, was measured on the Q8_0/Q4_0 kernel:
// 24 distinct 5632x2048 Q8_0 weights (160 MB) streamed at n=128 on one thread
// ran at the in-cache speed (5.4 ms each); bench-model pp128 Q4_0 samples in
// pack_panel went 1429/1736 -> 899/1391 (shared, noisy machine).
// Internal to kernels/x86; compiled in the files that include it (AVX-512).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace nexus {

template <int kRows>
struct NextPanel {
  const char* row[kRows] = {};
  int n_rows = 0, m = 0;
  int64_t lines = 0, line = 0, per_step = 0;

  // Rows [row0, min(row0 + kRows, r1)) of w (row_bytes apart, data_bytes of
  // weights each), spread over `steps` calls of step(). Empty past r1.
  static NextPanel rows(const uint8_t* w, size_t row_bytes, int64_t row0, int64_t r1, size_t data_bytes,
                        int64_t steps) {
    NextPanel p;
    p.n_rows = static_cast<int>(std::clamp<int64_t>(r1 - row0, 0, kRows));
    if (p.n_rows == 0 || steps <= 0) return p;
    for (int m = 0; m < p.n_rows; ++m)
      p.row[m] = reinterpret_cast<const char*>(w + (row0 + m) * static_cast<int64_t>(row_bytes));
    p.lines = static_cast<int64_t>(data_bytes / 64) + 2;  // + 2: a row need not start on a line boundary
    p.per_step = (p.lines * p.n_rows + steps - 1) / steps;
    return p;
  }

  inline __attribute__((always_inline)) void step() {
    for (int64_t i = 0; i < per_step && line < lines; ++i) {
      _mm_prefetch(row[m] + 64 * line, _MM_HINT_T0);
      if (++m == n_rows) m = 0, ++line;
    }
  }
};

}  // namespace nexus
