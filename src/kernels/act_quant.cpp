#include "kernels/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

void quantize_act_q8k(const float* x, BlockQ8K* out, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* v = x + b * 256;
    BlockQ8K& o = out[b];
    // The signed value of largest magnitude, the first one on ties.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float a = std::fabs(v[j]);
      if (a > amax) amax = a, max = v[j];
    }
    if (amax == 0.0f) {
      o.d = 0.0f;
      std::memset(o.qs, 0, sizeof o.qs);
      std::memset(o.bsums, 0, sizeof o.bsums);
      continue;
    }
    // -127 / max maps `max` to -127 and a value of the other sign and the same
    // magnitude to +127 (after one rounding of iscale and one of the product,
    // both well under 0.5 away); ggml's clamp at 127 is kept, though finite
    // inputs never reach it. nearbyint rounds half to even in the default
    // rounding mode, as ggml's nearest_int (adding 1.5 * 2^23) does.
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j)
      o.qs[j] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * v[j]))));
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += o.qs[16 * s + j];
      o.bsums[s] = static_cast<int16_t>(sum);
    }
    o.d = 1.0f / iscale;
  }
}

}  // namespace nexus
