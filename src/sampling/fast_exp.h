// Vectorizable exp for the sampler's softmax over the vocabulary.
//
// The sampler exponentiates every candidate's (logit - max) / T each token:
// 32000 std::exp calls cost ~0.2 ms, as much as a small model's forward pass.
// exp_nonpos is branch-free arithmetic that GCC/Clang vectorize: Cody-Waite
// range reduction x = n ln2 + r (|r| <= ln2/2), e^r by its Taylor polynomial to
// degree 6 (truncation error < r^7/7! ~ 1.2e-7 relative), 2^n built in the
// exponent bits. Relative error < 1e-6 over the domain (tested against
// std::exp). Only x <= 0 is needed (logits minus their max).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace nexus {

// e^x for x <= 0; 0 for x < -87 (where e^x is below float's normal range),
// -inf and NaN.
inline float exp_nonpos(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;       // ln 2, high bits (exact product with n)
  constexpr float kLn2Lo = 1.428606765330187045e-6f; // ln 2 - kLn2Hi
  constexpr float kRound = 12582912.0f;              // 1.5 * 2^23: adding it rounds to an integer
  // Branch-free so the loops vectorize: clamp, compute, then zero by a mask.
  // (std::max(-87, NaN) is -87, and NaN >= -87 is false: NaN gives 0.)
  const float keep = static_cast<float>(x >= -87.0f);
  const float xc = std::max(-87.0f, x);
  const float n = (xc * kLog2e + kRound) - kRound;  // nearest integer, in [-126, 0]
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return p * scale * keep;
}

// out[i] = e^((x[i] - max) * scale) for i < n, with max >= every x[i] and
// scale > 0; returns the sum of out (accumulated in double, 8 lanes).
inline double exp_shifted(const float* x, float* out, size_t n, float max, float scale) {
  for (size_t i = 0; i < n; ++i) out[i] = exp_nonpos((x[i] - max) * scale);
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) lanes[j] += out[i + j];
  double sum = 0;
  for (; i < n; ++i) sum += out[i];
  for (double l : lanes) sum += l;
  return sum;
}

}  // namespace nexus
