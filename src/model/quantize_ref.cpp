#include "model/quantize_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/quant_blocks.h"
#include "model/quantize_types.h"
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
    case GgmlType::Q4_1: quant::quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), n / 32); return;
    case GgmlType::Q5_0: quant::quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), n / 32); return;
    case GgmlType::Q5_1: quant::quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), n / 32); return;
    case GgmlType::Q2_K: quant::quantize_q2_K(src, static_cast<BlockQ2_K*>(dst), n / kQK_K); return;
    case GgmlType::Q3_K: quant::quantize_q3_K(src, static_cast<BlockQ3_K*>(dst), n / kQK_K); return;
    case GgmlType::Q4_K: quant::quantize_q4_K(src, static_cast<BlockQ4_K*>(dst), n / kQK_K); return;
    case GgmlType::Q5_K: quant::quantize_q5_K(src, static_cast<BlockQ5_K*>(dst), n / kQK_K); return;
    case GgmlType::Q6_K: quant::quantize_q6_K(src, static_cast<BlockQ6_K*>(dst), n / kQK_K); return;
    case GgmlType::IQ4_NL: quant::quantize_iq4_nl(src, static_cast<BlockIq4Nl*>(dst), n / 32); return;
    case GgmlType::IQ4_XS: quant::quantize_iq4_xs(src, static_cast<BlockIq4Xs*>(dst), n / kQK_K); return;
    default:
      throw Error("quantize_row_ref: cannot quantize to " + std::string(ggml_type_name(type)) +
                  " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, "
                  "IQ4_NL, IQ4_XS)");
  }
}

}  // namespace nexus
