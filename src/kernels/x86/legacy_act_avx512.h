// Activations for the AVX-512 legacy kernels (gemm_legacy_avx512.cpp), repacked
// once per call into the kernels' lane order: per quad of four 32-value blocks
// (IQ4_XS: four sub-blocks of 32, two quads per super-block of 256), register
// A holds values 0..15 of the four blocks and B values 16..31, so int32 lane
// 4k .. 4k + 3 of a vpdpbusd belongs to block k. Per lane the extras:
//   shifted weights (u8 = value + shift, shift = 1 << shift_log2): the
//   vpdpbusd start value -shift * (the sum of the 8 activation quants the lane
//   multiplies), so each lane ends with its exact signed partial sum;
//   Q4_1 / Q5_1 (shift_log2 < 0): s = d_x * qsum of block k in lane 4k,
//   zeros elsewhere, for the min term m_w * s.
//
// Internal to gemm_legacy_avx512.cpp, which includes it once and is compiled
// with the AVX-512 flags: everything is in an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/act_quant.h"

namespace nexus {
namespace {

// One quad of one token in the kernels' lane order.
struct alignas(64) QuadAct {
  int8_t a[64];       // values 0..15 of blocks 0, 1, 2, 3
  int8_t b[64];       // values 16..31 of blocks 0, 1, 2, 3
  int32_t extra[16];  // shifted types: vpdpbusd start value; Q4_1 / Q5_1: float s bits
  float dx[16];       // activation scale of block k in lanes 4k .. 4k + 3
};
static_assert(sizeof(QuadAct) == 256);

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Lane k (128 bits) <- 32 bytes of block k (two lanes per block) -> A and B.
inline void split_halves(const int8_t* q0, const int8_t* q1, const int8_t* q2, const int8_t* q3, __m512i& a,
                         __m512i& b) {
  const __m512i q01 = _mm512_inserti64x4(_mm512_castsi256_si512(load32(q0)), load32(q1), 1);
  const __m512i q23 = _mm512_inserti64x4(_mm512_castsi256_si512(load32(q2)), load32(q3), 1);
  a = _mm512_shuffle_i64x2(q01, q23, _MM_SHUFFLE(2, 0, 2, 0));
  b = _mm512_shuffle_i64x2(q01, q23, _MM_SHUFFLE(3, 1, 3, 1));
}

// -shift * (sum of each lane's 8 activation quants), shift = 1 << log2.
inline __m512i lane_offsets(__m512i a, __m512i b, int log2) {
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, a), ones, b);
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_sll_epi32(sums, _mm_cvtsi32_si128(log2)));
}

inline __m512i spread4() { return _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3); }

// Four blocks (missing ones zero) -> one QuadAct. shift_log2 < 0: the min
// types' s instead of offsets.
void repack_quad(const BlockQ8Act* x, QuadAct& out, int shift_log2) {
  __m512i a, b;
  split_halves(x[0].qs, x[1].qs, x[2].qs, x[3].qs, a, b);
  _mm512_store_si512(out.a, a);
  _mm512_store_si512(out.b, b);
  const __m128 d4 = _mm_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d);
  _mm512_store_ps(out.dx, _mm512_permutexvar_ps(spread4(), _mm512_zextps128_ps512(d4)));
  if (shift_log2 >= 0) {
    _mm512_store_si512(out.extra, lane_offsets(a, b, shift_log2));
  } else {
    const __m128 s4 = _mm_mul_ps(d4, _mm_cvtepi32_ps(_mm_setr_epi32(x[0].qsum, x[1].qsum, x[2].qsum, x[3].qsum)));
    _mm512_store_ps(reinterpret_cast<float*>(out.extra),
                    _mm512_maskz_permutexvar_ps(0x1111, spread4(), _mm512_zextps128_ps512(s4)));
  }
}

void repack_q8(const BlockQ8Act* x, int64_t n_blocks, int shift_log2, QuadAct* out) {
  const int64_t n_full = n_blocks / 4;
  for (int64_t q = 0; q < n_full; ++q) repack_quad(x + 4 * q, out[q], shift_log2);
  if (n_blocks % 4 != 0) {
    BlockQ8Act pad[4] = {};
    std::copy(x + 4 * n_full, x + n_blocks, pad);
    repack_quad(pad, out[n_full], shift_log2);
  }
}

// Super-block -> two QuadActs (sub-blocks 0..3, 4..7), offsets for level + 128.
void repack_q8k(const BlockQ8K* x, int64_t n_super, QuadAct* out) {
  for (int64_t i = 0; i < n_super; ++i)
    for (int h = 0; h < 2; ++h) {
      const int8_t* qs = x[i].qs + 128 * h;
      QuadAct& o = out[2 * i + h];
      __m512i a, b;
      split_halves(qs, qs + 32, qs + 64, qs + 96, a, b);
      _mm512_store_si512(o.a, a);
      _mm512_store_si512(o.b, b);
      _mm512_store_si512(o.extra, lane_offsets(a, b, 7));
      _mm512_store_ps(o.dx, _mm512_set1_ps(x[i].d));
    }
}

}  // namespace
}  // namespace nexus
