// Vectorizable exp for softmaxes: the sampler over the vocabulary, attention
// over each chunk of keys.
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
#include <cmath>
#include <bit>
#include <cstddef>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

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

#if defined(__AVX2__) && defined(__FMA__)
// exp_nonpos on 8 lanes, the same arithmetic (and results) written with
// intrinsics, for loops GCC does not vectorize by itself.
inline __m256 exp_nonpos8(__m256 x) {
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);  // false for NaN
  const __m256 xc = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 round = _mm256_set1_ps(12582912.0f);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), round), round);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}
#endif

#if defined(__AVX512F__)
// exp_nonpos on 16 lanes: the operations of exp_nonpos8 in the same order, so
// every lane has the bits exp_nonpos8 gives it (NaN and x < -87 give +0).
inline __m512 exp_nonpos16(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);  // false for NaN
  const __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 round = _mm512_set1_ps(12582912.0f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), round), round);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}
#endif

// tanh(x) from exp_nonpos, branch-free so that loops over it vectorize (the
// gemma2 soft-caps run it over every logit of a 256k vocabulary each token;
// libm's tanhf there cost 5% of a decode step). |x| >= 0.25: tanh|x| =
// (1 - e) / (1 + e) with e = e^(-2|x|); below, where 1 - e would cancel,
// the Taylor series of tanh to x^9 (truncation < 1e-8 relative). Relative
// error < 2e-6 everywhere (tested against std::tanh); NaN stays NaN.
inline float tanh_fast(float x) {
  const float a = std::abs(x);
  const float e = exp_nonpos(-2.0f * a);
  const float q = (1.0f - e) / (1.0f + e);
  const float a2 = a * a;
  const float p =
      a * (1.0f + a2 * (-1.0f / 3 + a2 * (2.0f / 15 + a2 * (-17.0f / 315 + a2 * (62.0f / 2835)))));
  const float t = a < 0.25f ? p : (a == a ? q : a);
  return std::copysign(t, x);
}

// out[i] = e^((x[i] - max) * scale) for i < n, with max >= every x[i] and
// scale > 0; returns the sum of out (accumulated in double, 8 lanes).
// In place (out == x) is allowed: GCC's alias check rejects it and falls back
// to the scalar loop (6x slower over a vocabulary), so the AVX2 path loads
// and stores 8 lanes itself.
inline double exp_shifted(const float* x, float* out, size_t n, float max, float scale) {
  size_t i0 = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 vmax = _mm256_set1_ps(max), vscale = _mm256_set1_ps(scale);
  for (; i0 + 8 <= n; i0 += 8)
    _mm256_storeu_ps(out + i0, exp_nonpos8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i0), vmax), vscale)));
#endif
  for (size_t i = i0; i < n; ++i) out[i] = exp_nonpos((x[i] - max) * scale);
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
