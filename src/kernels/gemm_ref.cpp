// Portable reference kernels for the float types, Q8_0 and Q4_0 (gemm_ref.h).
#include "kernels/gemm_ref.h"

#include <vector>

#include "kernels/act_quant.h"
#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

// Integer dot product of one weight block with one activation block.
int32_t block_dot(const BlockQ8_0& w, const BlockQ8Act& x) {
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += w.qs[j] * x.qs[j];
  return isum;
}

int32_t block_dot(const BlockQ4_0& w, const BlockQ8Act& x) {
  int32_t isum = 0;
  for (int j = 0; j < 16; ++j) {
    isum += ((w.qs[j] & 0x0f) - 8) * x.qs[j];
    isum += ((w.qs[j] >> 4) - 8) * x.qs[j + 16];
  }
  return isum;
}

template <class Block>
void quant_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* xv,
               int64_t n_tokens, float* y, int64_t ldy) {
  const auto* x = static_cast<const BlockQ8Act*>(xv);
  const int64_t n_blocks = n_cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const Block*>(w + r * row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const BlockQ8Act* xb = x + t * n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b)
        acc += fp16_to_fp32(wb[b].d) * xb[b].d * static_cast<float>(block_dot(wb[b], xb[b]));
      y[t * ldy + r] = acc;
    }
  }
}

template <DequantRowFn kDequant>
void float_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* xv,
               int64_t n_tokens, float* y, int64_t ldy) {
  const auto* x = static_cast<const float*>(xv);
  std::vector<float> row(static_cast<size_t>(n_cols));
  for (int64_t r = r0; r < r1; ++r) {
    kDequant(w + r * row_bytes, row.data(), n_cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int64_t c = 0; c < n_cols; ++c) acc += row[c] * x[t * n_cols + c];
      y[t * ldy + r] = acc;
    }
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_ref_f32) { float_ref<dequantize_row_f32>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy); }
NEXUS_GEMM_KERNEL(gemm_ref_f16) { float_ref<dequantize_row_f16>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy); }
NEXUS_GEMM_KERNEL(gemm_ref_bf16) { float_ref<dequantize_row_bf16>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy); }
NEXUS_GEMM_KERNEL(gemm_ref_q8_0) { quant_ref<BlockQ8_0>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy); }
NEXUS_GEMM_KERNEL(gemm_ref_q4_0) { quant_ref<BlockQ4_0>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy); }

}  // namespace nexus
