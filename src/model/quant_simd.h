// Eight float / int32 lanes (GCC and clang vector extensions; AVX2 under the
// build's x86-64-v3 baseline) for the reference quantizers' scale searches.
//
// The searches try many candidate scales on the same few values; each lane
// holds one candidate, so a lane's sums still run over the values in ggml's
// order and every lane's result is bit-identical to the scalar loop's.
// Nothing here reorders a reduction across lanes.
#pragma once

#include <cstdint>

#ifdef __AVX2__
#include <immintrin.h>
#endif

namespace nexus::quant {

using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));

inline F8 splat(float v) { return F8{v, v, v, v, v, v, v, v}; }
inline I8 splat_i(int32_t v) { return I8{v, v, v, v, v, v, v, v}; }

// nearest_int (quant_search.h) in every lane: the same bits as the scalar trick.
inline I8 nearest_int8(F8 v) {
  const I8 bits = reinterpret_cast<I8>(v + splat(12582912.0f));
  return (bits & splat_i(0x007fffff)) - splat_i(0x00400000);
}

// Comparisons give -1 (true) or 0 per lane.
inline I8 select(I8 mask, I8 a, I8 b) { return (a & mask) | (b & ~mask); }
inline F8 select(I8 mask, F8 a, F8 b) {
  return reinterpret_cast<F8>(select(mask, reinterpret_cast<I8>(a), reinterpret_cast<I8>(b)));
}
inline I8 clamp(I8 l, int32_t lo, int32_t hi) {
#ifdef __AVX2__
  const __m256i c = _mm256_max_epi32(reinterpret_cast<__m256i>(l), _mm256_set1_epi32(lo));
  return reinterpret_cast<I8>(_mm256_min_epi32(c, _mm256_set1_epi32(hi)));
#else
  l = select(l < splat_i(lo), splat_i(lo), l);
  return select(l > splat_i(hi), splat_i(hi), l);
#endif
}
inline F8 to_float(I8 l) { return __builtin_convertvector(l, F8); }
inline F8 abs(F8 v) { return reinterpret_cast<F8>(reinterpret_cast<I8>(v) & splat_i(0x7fffffff)); }

}  // namespace nexus::quant
