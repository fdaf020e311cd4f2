// Scale searches shared by the K-quant reference quantizers
// (model/quantize_kquants.cpp): for one sub-block of n floats, the integer
// codes L and the float scale (and minimum) that ggml's quantizer picks.
//
// Source: ggml's ggml-quants.c (nearest_int, make_qx_quants, make_q3_quants,
// make_qkx2_quants; llama.cpp build of February 2025). The float arithmetic
// is done in ggml's order, operation by operation, so that the choices (and
// hence the bytes written) are identical; these files must be compiled with
// -ffp-contract=off (src/CMakeLists.txt), as ggml-base is in effect (it is
// built for baseline x86-64, which has no FMA to contract into). Candidate
// scales are evaluated 8 per vector (model/quant_simd.h), each lane summing
// in ggml's order, then compared one by one in ggml's order.
#pragma once

#include <cstdint>
#include <cstring>

namespace nexus::quant {

// The smallest |x| a sub-block's largest value may have to be quantized
// (ggml's GROUP_MAX_EPS): below it the sub-block is all zero codes.
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |v| <= 2^22 - 1 (ggml's nearest_int):
// adding 1.5 * 2^23 puts the integer part in the low mantissa bits. Outside
// that range the result is what ggml's trick gives (asserts are off in its
// release builds), so it is kept instead of lrintf.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// Symmetric codes L[i] in [0, 2 * nmax) (signed code + nmax), scale
// returned: x ~ scale * (L - nmax). Starts from scale = max / -nmax (max =
// the signed value of largest magnitude) and tries 18 neighbours
// -(nmax + 0.1 * is) / max, is = -9..9, keeping the one that best fits x
// in least squares weighted by x^2 (ggml's rmse_type 1, no importance
// weights; the only mode Q6_K's reference uses). Returns 0 with L = 0 when
// max |x| < kGroupMaxEps. n <= 16.
float make_qx_quants_rmse1(int n, int nmax, const float* x, int8_t* L);

// Q3_K's symmetric search: codes L in [0, 2 * nmax) and their scale, from
// the scale max / -nmax, then up to five passes that move single codes when
// that improves the x^2-weighted fit (ggml's make_q3_quants, do_rmse = true).
float make_q3_quants_rmse(int n, int nmax, const float* x, int8_t* L);

// Asymmetric codes L in [0, nmax] with x ~ scale * L - *the_min (ggml's
// make_qkx2_quants): starts from min(x, 0)..max(x), then tries nstep + 1
// scales (rmin + rdelta * is + nmax) / (max - min), each refit in weighted
// least squares for scale and min (min clamped to <= 0), keeping the one of
// smallest weighted error (|error| when use_mad, error^2 otherwise).
// *the_min is returned as a positive offset. n <= 32, nstep <= 22.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, float rmin,
                       float rdelta, int nstep, bool use_mad);

}  // namespace nexus::quant
