// Portable reference kernels: plain loops, one (row, token) at a time.
#include <vector>

#include "kernels/dequant.h"
#include "kernels/gemm_kernels.h"
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
void quant_ref(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
               int64_t n_tokens, float* y, int64_t ldy) {
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
  static const GemmKernels k{"ref", quant_ref<BlockQ8_0>, quant_ref<BlockQ4_0>, float_ref<GgmlType::F32>, float_ref<GgmlType::F16>,
                             float_ref<GgmlType::BF16>};
  return k;
}

}  // namespace nexus
