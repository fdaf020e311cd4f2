#include "model/quantize_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/quant_blocks.h"
#include "util/error.h"

namespace nexus {
namespace {

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  constexpr int kHalf = kQK4_0 / 2;
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    // The signed value of largest magnitude: d = m / -8 maps it to code 0
    // exactly, giving the other sign one more level (codes 1..15).
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < kQK4_0; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        m = x[j];
      }
    const float d = m / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kHalf; ++j) {
      // x * id is in [-8, 8], so the sum is positive and truncation rounds half up.
      const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[j + kHalf] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace

void quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t n) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  if (!t || n < 0 || n % t->block_size != 0)
    throw Error("quantize_row_ref: " + std::to_string(n) + " values cannot form a row of " +
                std::string(ggml_type_name(type)));
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case GgmlType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case GgmlType::Q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n / kQK8_0); return;
    case GgmlType::Q4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n / kQK4_0); return;
    default:
      throw Error("quantize_row_ref: cannot quantize to " + std::string(ggml_type_name(type)) +
                  " (supported: F32, F16, BF16, Q8_0, Q4_0)");
  }
}

}  // namespace nexus
