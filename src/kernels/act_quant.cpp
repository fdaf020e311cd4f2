#include "kernels/act_quant.h"

#include <cmath>

#include "kernels/quant_blocks.h"

namespace nexus {

void quantize_act_q8(const float* x, BlockQ8Act* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int8_t q = static_cast<int8_t>(std::nearbyint(v[j] * id));
      out[b].qs[j] = q;
      sum += q;
    }
    out[b].d = fp16_to_fp32(fp32_to_fp16(d));
    out[b].qsum = sum;
  }
}

}  // namespace nexus
