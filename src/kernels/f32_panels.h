// F32 weights repacked into panels for the panel kernel of matmul().
//
// Layout: panel p holds rows [16p, 16p + 16) column by column:
//   panels[(p * n_cols + c) * 16 + i] = W[16p + i, c]
// for c < n_cols, i < 16; rows past n_rows are zero. ceil(n_rows / 16)
// panels, 64 bytes per column of a panel.
//
// Why: a row-major product sums each (row, token) across SIMD lanes at the
// end; for short rows (64 values in TinyLLama-v0's 32000-row output layer)
// those sums cost as much as the products. With panels, a register is one
// column of 16 rows and the sums run down the lanes (kernels/x86/
// gemm_panels_avx512.cpp, gemm_panels_avx2.cpp; both give the same bits). The copy costs the weight's size in
// memory, which is why only F32 weights (the small models) are packed.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/tensor.h"

namespace nexus {

constexpr int64_t kPanelRows = 16;

// True when matmul() runs panels on this CPU (AVX2 or AVX-512, and
// NEXUS_KERNELS does not force the reference table).
bool f32_panels_supported();

// The panels of an F32 weight; nullptr when w is not F32, is one row (a norm)
// or the CPU has no panel kernel. Set WeightView::panels to the result (the
// caller keeps it alive as long as the view).
std::shared_ptr<const float[]> pack_f32_panels(const WeightView& w);

// Internal to matmul(): panels [p0, p1) of a packed [n_rows, n_cols] weight
// against x [n_tokens, n_cols], into y[t * ldy + r].
// gemm_f32_panels_avx512 needs AVX-512F, gemm_f32_panels_avx2 AVX2 + FMA.
void gemm_f32_panels_avx512(const float* panels, int64_t p0, int64_t p1, int64_t n_rows, int64_t n_cols,
                            const float* x, int64_t n_tokens, float* y, int64_t ldy);
void gemm_f32_panels_avx2(const float* panels, int64_t p0, int64_t p1, int64_t n_rows, int64_t n_cols,
                          const float* x, int64_t n_tokens, float* y, int64_t ldy);

}  // namespace nexus
