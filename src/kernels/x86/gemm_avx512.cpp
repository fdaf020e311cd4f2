// AVX-512 VNNI kernels: Q8_0 / Q4_0 from gemm_quant_avx512.cpp (two blocks
// per 512-bit vpdpbusd), float weights 16 lanes at a time (compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni; see src/CMakeLists.txt).
#include "kernels/x86/gemm_body.h"
#include "kernels/x86/gemm_quant_avx512.h"

namespace nexus {
namespace {

struct Load512F32 {
  static __m512 load(const uint8_t* row, int64_t c) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c); }
};
struct Load512F16 {
  static __m512 load(const uint8_t* row, int64_t c) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  }
};
struct Load512BF16 {
  static __m512 load(const uint8_t* row, int64_t c) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
};

// As float_tile in gemm_body.h, 16 lanes wide; the tail past the last 16
// columns goes through the 8-lane loader and then scalars.
template <class Load512, class Load256, int T>
void float_tile512(const uint8_t* row, int64_t n_cols, const float* x, float* y, int64_t ldy) {
  __m512 even[T], odd[T];
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  const int64_t n32 = n_cols & ~int64_t{31}, n16 = n_cols & ~int64_t{15};
  int64_t c = 0;
  for (; c < n32; c += 32) {
    const __m512 w0 = Load512::load(row, c), w1 = Load512::load(row, c + 16);
    for (int t = 0; t < T; ++t) {
      even[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + t * n_cols + c), even[t]);
      odd[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + t * n_cols + c + 16), odd[t]);
    }
  }
  for (; c < n16; c += 16) {
    const __m512 w0 = Load512::load(row, c);
    for (int t = 0; t < T; ++t) even[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + t * n_cols + c), even[t]);
  }
  for (int t = 0; t < T; ++t) {
    float s = _mm512_reduce_add_ps(_mm512_add_ps(even[t], odd[t]));
    for (int64_t i = n16; i < n_cols; ++i) s += Load256::at(row, i) * x[t * n_cols + i];
    y[t * ldy] = s;
  }
}

template <class Load512, class Load256>
void float_rows512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const float* x,
                   int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    int64_t t = 0;
    for (; t + kTile <= n_tokens; t += kTile)
      float_tile512<Load512, Load256, kTile>(row, n_cols, x + t * n_cols, y + t * ldy + r, ldy);
    for (; t < n_tokens; ++t) float_tile512<Load512, Load256, 1>(row, n_cols, x + t * n_cols, y + t * ldy + r, ldy);
  }
}

}  // namespace

const GemmKernels* gemm_kernels_avx512_vnni() {
  static const GemmKernels k{"avx512_vnni",
                             gemm_q8_0_avx512,
                             gemm_q4_0_avx512,
                             float_rows512<Load512F32, LoadF32>,
                             float_rows512<Load512F16, LoadF16>,
                             float_rows512<Load512BF16, LoadBF16>};
  return &k;
}

}  // namespace nexus
