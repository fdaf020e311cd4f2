// Small 256-bit helpers shared by the AVX2 kernels (gemm_body.h,
// gemm_legacy_avx2.cpp): x86-64-v3, the build's baseline.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace nexus {

// The sum of a register's 8 floats.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// An fp16 bit pattern as float (F16C).
inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

}  // namespace nexus
