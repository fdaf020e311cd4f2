// Sixteen query heads of one token at head_dim 4, no GQA, with 512-bit
// registers (attention_heads16_hd4_paged* in kernels/attention.h). Compiled
// with the AVX-512 flags of gemm_avx512.cpp (src/CMakeLists.txt); called only
// after CPUID said yes.
//
// heads8_hd4 of attention.cpp, twice as wide: a cache row's 16 heads x 4
// values are four registers, register i = heads 4i .. 4i + 3 (one per
// 128-bit lane), read in place. The per-lane shuffle tree then leaves head
// 4m + L's score in lane 4L + m (the online softmax state m, l and each
// position's exponentials use that order), and expand(i) spreads those
// lanes over register i. Every head sees the operations of
// attention_head_paged(_f16) in their order: the same bits (test_attention).
#include "kernels/x86/attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/fast_exp.h"

namespace nexus {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Lane 4L + d of the result = lane 4L + i of a score-ordered register: head
// 4i + L's value in every lane of that head's four.
inline __m512i expand(int32_t i) {
  return _mm512_setr_epi32(i, i, i, i, 4 + i, 4 + i, 4 + i, 4 + i, 8 + i, 8 + i, 8 + i, 8 + i, 12 + i, 12 + i, 12 + i,
                           12 + i);
}

template <class T>
void heads16_hd4(const float* q, const PagedKv& kv, int32_t n_keys, float scale, float* out) {
  const T* kb = static_cast<const T*>(kv.k);
  const T* vb = static_cast<const T*>(kv.v);
  __m512 qv[4], acc[4];
  __m512i ex[4];
  for (int32_t i = 0; i < 4; ++i) {
    qv[i] = _mm512_loadu_ps(q + 16 * i);
    acc[i] = _mm512_setzero_ps();
    ex[i] = expand(i);
  }
  __m512 m = _mm512_set1_ps(kNegInf), l = _mm512_setzero_ps();
  const __m512 vscale = _mm512_set1_ps(scale);
  alignas(64) float e[kAttnChunk][16];  // scores of the chunk's positions, then their exponentials
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    const int64_t off = kv.block_table[p0 / kv.block_size] * kv.block_stride + (p0 % kv.block_size) * kv.kv_stride;
    __m512 chunk_max = _mm512_set1_ps(kNegInf);
    for (int32_t j = 0; j < count; ++j) {
      const T* row = kb + off + j * kv.kv_stride;
      __m512 p[4];
      for (int32_t i = 0; i < 4; ++i) p[i] = _mm512_mul_ps(load16(row + 16 * i), qv[i]);
      // Per 128-bit lane: (x0 + x1) + (x2 + x3) of each head, as the hadd tree.
      const __m512 ab = _mm512_add_ps(_mm512_shuffle_ps(p[0], p[1], 0x88), _mm512_shuffle_ps(p[0], p[1], 0xDD));
      const __m512 cd = _mm512_add_ps(_mm512_shuffle_ps(p[2], p[3], 0x88), _mm512_shuffle_ps(p[2], p[3], 0xDD));
      const __m512 sc =
          _mm512_mul_ps(_mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x88), _mm512_shuffle_ps(ab, cd, 0xDD)), vscale);
      _mm512_store_ps(e[j], sc);
      chunk_max = _mm512_max_ps(chunk_max, sc);
    }
    // Heads whose maximum grew rescale what they hold (a factor of 1 elsewhere).
    const __mmask16 grew = _mm512_cmp_ps_mask(chunk_max, m, _CMP_GT_OQ);
    const __m512 corr = _mm512_mask_blend_ps(grew, _mm512_set1_ps(1.0f), exp_nonpos16(_mm512_sub_ps(m, chunk_max)));
    m = _mm512_mask_blend_ps(grew, m, chunk_max);
    l = _mm512_mul_ps(l, corr);
    for (int32_t i = 0; i < 4; ++i) acc[i] = _mm512_mul_ps(acc[i], _mm512_permutexvar_ps(ex[i], corr));
    for (int32_t j = 0; j < kAttnChunk; ++j)
      _mm512_store_ps(e[j], j < count ? exp_nonpos16(_mm512_sub_ps(_mm512_load_ps(e[j]), m)) : _mm512_setzero_ps());
    // l += the chunk's sum, in hsum's order over positions.
    __m512 s[8];
    for (int32_t j = 0; j < 8; ++j) s[j] = _mm512_add_ps(_mm512_load_ps(e[j]), _mm512_load_ps(e[j + 8]));
    for (int32_t j = 0; j < 4; ++j) s[j] = _mm512_add_ps(s[j], s[j + 4]);
    l = _mm512_add_ps(l, _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3])));
    // Even and odd positions in two chains, summed at the end, as
    // accumulate_hd4; the four value registers' chains interleaved.
    __m512 even[4], odd[4];
    for (int32_t i = 0; i < 4; ++i) even[i] = odd[i] = _mm512_setzero_ps();
    for (int32_t j = 0; j < count; ++j) {
      const __m512 ej = _mm512_load_ps(e[j]);
      const T* row = vb + off + j * kv.kv_stride;
      __m512* chain = j % 2 == 0 ? even : odd;
      for (int32_t i = 0; i < 4; ++i)
        chain[i] = _mm512_fmadd_ps(_mm512_permutexvar_ps(ex[i], ej), load16(row + 16 * i), chain[i]);
    }
    for (int32_t i = 0; i < 4; ++i) acc[i] = _mm512_add_ps(acc[i], _mm512_add_ps(even[i], odd[i]));
  }
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), l);
  for (int32_t i = 0; i < 4; ++i)
    _mm512_storeu_ps(out + 16 * i, _mm512_mul_ps(acc[i], _mm512_permutexvar_ps(ex[i], inv)));
}

}  // namespace

void attention_heads16_hd4_paged_avx512(const float* q, const PagedKv& kv, int32_t n_keys, float scale, float* out) {
  heads16_hd4<float>(q, kv, n_keys, scale, out);
}

void attention_heads16_hd4_paged_f16_avx512(const float* q, const PagedKv& kv, int32_t n_keys, float scale,
                                            float* out) {
  heads16_hd4<uint16_t>(q, kv, n_keys, scale, out);
}

}  // namespace nexus
