#include "kernels/family_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fast_exp.h"

#include "kernels/quant_blocks.h"

namespace nexus {

void layernorm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  const float m = static_cast<float>(mean);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * scale * w[i] + (b ? b[i] : 0.0f);
}

void add_bias_rows(float* x, const float* b, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) x[r * n + i] += b[i];
}

namespace {

inline float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// ggml's CPU GELU reads a table of fp16 results indexed by the fp16 input
// for |x| < 10 (GGML_GELU_FP16, on by default), so llama.cpp's activations
// carry fp16 rounding there; computing it the same way keeps the gemma2 /
// starcoder2 logits within float32 rounding of llama.cpp's (measured: exact
// tanh GELU left gemma2-d64 8x farther, 0.008 RMS over 26 layers). The same
// table here: 65536 floats, each gelu_tanh of an fp16 value rounded to fp16,
// built once; a lookup replaces a libm tanhf per element.
const float* gelu_fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < t.size(); ++h)
      t[h] = fp16_to_fp32(fp32_to_fp16(gelu_tanh(fp16_to_fp32(static_cast<uint16_t>(h)))));
    return t;
  }();
  return table.data();
}

// out[i] = gelu(x[i]) * (up ? up[i] : 1), in chunks whose fp16 rounding is
// done by the vector conversion.
void gelu_times(float* x, const float* up, int64_t n) {
  const float* table = gelu_fp16_table();
  constexpr int64_t kChunk = 256;
  uint16_t h[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    float* xs = x + i0;
    fp32_to_fp16_n(xs, h, m);
    for (int64_t i = 0; i < m; ++i) {
      const float v = xs[i];
      const float g = v <= -10.0f ? 0.0f : v >= 10.0f ? v : table[h[i]];
      xs[i] = up ? g * up[i0 + i] : g;
    }
  }
}

}  // namespace

void gelu(float* x, int64_t n) { gelu_times(x, nullptr, n); }

void geglu(float* gate, const float* up, int64_t n) { gelu_times(gate, up, n); }

void softcap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * tanh_fast(x[i] * inv);
}

void rope_angles_ext(int32_t pos, int32_t n_rot, const RopeParams& p, float* cs) {
  const double scale = p.freq_scale;
  double mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * std::log(1.0 / scale);
  const double span = std::max(0.001, static_cast<double>(p.corr_high) - p.corr_low);
  for (int32_t i = 0; i < n_rot; i += 2) {
    const double f = p.factors ? p.factors[i / 2] : 1.0;
    const double base_theta = pos * std::pow(static_cast<double>(p.freq_base), -static_cast<double>(i) / n_rot);
    double theta;
    if (p.ext_factor == 0.0f) {
      theta = base_theta * scale / f;
    } else {
      const double extrap = base_theta / f, interp = extrap * scale;
      const double y = (i / 2 - static_cast<double>(p.corr_low)) / span;
      const double mix = (1.0 - std::min(1.0, std::max(0.0, y))) * p.ext_factor;
      theta = interp * (1.0 - mix) + extrap * mix;
    }
    if (mscale == 1.0) {
      cs[i] = static_cast<float>(std::cos(theta));
      cs[i + 1] = static_cast<float>(std::sin(theta));
    } else {
      cs[i] = static_cast<float>(std::cos(theta) * mscale);
      cs[i + 1] = static_cast<float>(std::sin(theta) * mscale);
    }
  }
}

void rope_yarn_corr_dims(int32_t n_rot, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                         float* low, float* high) {
  auto dim = [&](double beta) {
    return n_rot * std::log(n_ctx_orig / (beta * 2.0 * M_PI)) / (2.0 * std::log(static_cast<double>(freq_base)));
  };
  *low = static_cast<float>(std::max(0.0, std::floor(dim(beta_fast))));
  *high = static_cast<float>(std::min(static_cast<double>(n_rot - 1), std::ceil(dim(beta_slow))));
}

void rope_apply_neox(float* x, int32_t n_head, int32_t head_dim, int32_t n_rot, const float* cs) {
  const int32_t half = n_rot / 2;
  for (int32_t h = 0; h < n_head; ++h)
    for (int32_t j = 0; j < half; ++j) {
      float* v = x + h * head_dim;
      const float c = cs[2 * j], s = cs[2 * j + 1], v0 = v[j], v1 = v[j + half];
      v[j] = std::fma(v0, c, -(v1 * s));
      v[j + half] = std::fma(v0, s, v1 * c);
    }
}

}  // namespace nexus
