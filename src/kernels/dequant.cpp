// Dequantization of the float types, Q8_0 and Q4_0 (dequant.h), and the
// dispatch through the kernel table.
#include "kernels/dequant.h"

#include <cstring>
#include <string>

#include "kernels/quant_blocks.h"
#include "kernels/weight_kernels.h"
#include "util/error.h"

namespace nexus {

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const TypeKernels* k = type_kernels(type);
  if (!k) throw Error("dequantize_row: unsupported weight type " + std::string(ggml_type_name(type)));
  k->dequantize(src, dst, n);
}

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) dst[i * kQK8_0 + j] = d * static_cast<float>(b[i].qs[j]);
  }
}

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    float* out = dst + i * kQK4_0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      out[j] = d * static_cast<float>((b[i].qs[j] & 0x0f) - 8);
      out[j + kQK4_0 / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

}  // namespace nexus
