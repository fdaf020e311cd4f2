// Portable reference kernels: plain loops, one (row, token) at a time.
#include <vector>

#include "kernels/dequant.h"
#include "kernels/gemm_kernels.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

void q8_0_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
              int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const BlockQ8_0*>(w + r * row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const BlockQ8Act* xb = x + t * n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) isum += wb[b].qs[j] * xb[b].qs[j];
        acc += fp16_to_fp32(wb[b].d) * xb[b].d * static_cast<float>(isum);
      }
      y[t * ldy + r] = acc;
    }
  }
}

void q4_0_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
              int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const BlockQ4_0*>(w + r * row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const BlockQ8Act* xb = x + t * n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += ((wb[b].qs[j] & 0x0f) - 8) * xb[b].qs[j];
          isum += ((wb[b].qs[j] >> 4) - 8) * xb[b].qs[j + 16];
        }
        acc += fp16_to_fp32(wb[b].d) * xb[b].d * static_cast<float>(isum);
      }
      y[t * ldy + r] = acc;
    }
  }
}

template <GgmlType kType>
void float_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
               int64_t n_tokens, float* y, int64_t ldy) {
  std::vector<float> row(static_cast<size_t>(n_cols));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(kType, w + r * row_bytes, row.data(), n_cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int64_t c = 0; c < n_cols; ++c) acc += row[c] * x[t * n_cols + c];
      y[t * ldy + r] = acc;
    }
  }
}

}  // namespace

const GemmKernels& gemm_kernels_ref() {
  static const GemmKernels k{"ref", q8_0_ref, q4_0_ref, float_ref<GgmlType::F32>, float_ref<GgmlType::F16>,
                             float_ref<GgmlType::BF16>};
  return k;
}

}  // namespace nexus
