#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/fast_exp.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/attention_avx512.h"

namespace nexus {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Scores of `count` (<= 16) keys, scaled; lanes past count are -inf.
// Generic: any head_dim.
void scores_generic(const float* q, const float* k, int64_t kv_stride, int32_t count, int32_t head_dim, float scale,
                    float* score) {
  for (int32_t j = 0; j < kAttnChunk; ++j) {
    if (j >= count) {
      score[j] = kNegInf;
      continue;
    }
    const float* kr = k + j * kv_stride;
    float s = 0.0f;
    for (int32_t i = 0; i < head_dim; ++i) s += q[i] * kr[i];
    score[j] = s * scale;
  }
}

// head_dim a multiple of 8: each key's products stay in 8 lanes, then eight
// keys' lanes are summed at once with a horizontal-add tree. k.load8(j, i)
// gives values [i, i + 8) of key j; rows past count are not read.
template <class Rows>
[[gnu::always_inline]] inline void scores_avx2(const float* q, const Rows& k, int32_t count, int32_t head_dim,
                                               float scale, float* score) {
  for (int32_t g = 0; g < kAttnChunk; g += 8) {
    // Dims outer, keys inner: eight independent FMA chains in flight, not one
    // key's chain of head_dim / 8 dependent FMAs after another. Each key's
    // lanes see the same operations in the same order either way.
    const int32_t n = std::min(8, count - g);
    __m256 v[8];
    for (int32_t jj = 0; jj < 8; ++jj) v[jj] = _mm256_setzero_ps();
    if (n == 8) {
      for (int32_t i = 0; i < head_dim; i += 8) {
        const __m256 qi = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8  // v[] stays in registers only when unrolled (-O2 does not)
        for (int32_t jj = 0; jj < 8; ++jj) v[jj] = _mm256_fmadd_ps(qi, k.load8(g + jj, i), v[jj]);
      }
    } else {
      for (int32_t jj = 0; jj < n; ++jj)
        for (int32_t i = 0; i < head_dim; i += 8)
          v[jj] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), k.load8(g + jj, i), v[jj]);
    }
    const __m256 h0123 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 h4567 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                                      _mm256_permute2f128_ps(h0123, h4567, 0x31));
    _mm256_storeu_ps(score + g, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
    for (int32_t jj = std::clamp(count - g, 0, 8); jj < 8; ++jj) score[g + jj] = kNegInf;
  }
}

// head_dim 4 (tiny models): two keys per 8-lane register, then a horizontal-
// add tree sums eight keys' products at once. row(j) gives key j's 4 values
// (as float32; fp16 rows are widened exactly), rows past count are not read.
template <class Rows>
[[gnu::always_inline]] inline void scores_hd4(const float* q, const Rows& rows, int32_t count, float scale,
                                              float* score) {
  const __m256 qq = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(q));
  auto key = [&](int32_t j) { return j < count ? rows.load4(j) : _mm_setzero_ps(); };
  for (int32_t g = 0; g < kAttnChunk; g += 8) {
    __m256 p[4];
    for (int32_t i = 0; i < 4; ++i) p[i] = _mm256_mul_ps(_mm256_set_m128(key(g + 2 * i + 1), key(g + 2 * i)), qq);
    // Lanes hold keys g + [0, 2, 4, 6 | 1, 3, 5, 7]; put them in order.
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(p[0], p[1]), _mm256_hadd_ps(p[2], p[3]));
    const __m256 sums = _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_ps(score + g, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
    for (int32_t jj = std::clamp(count - g, 0, 8); jj < 8; ++jj) score[g + jj] = kNegInf;
  }
}

// acc[0..4) += sum_j score[j] * v_j for head_dim 4, two keys per register.
template <class Rows>
[[gnu::always_inline]] inline void accumulate_hd4(const float* score, const Rows& rows, int32_t count, float* acc) {
  __m256 a = _mm256_setzero_ps();
  int32_t j = 0;
  for (; j + 1 < count; j += 2)
    a = _mm256_fmadd_ps(_mm256_set_m128(_mm_set1_ps(score[j + 1]), _mm_set1_ps(score[j])),
                        _mm256_set_m128(rows.load4(j + 1), rows.load4(j)), a);
  if (j < count)
    a = _mm256_fmadd_ps(_mm256_set_m128(_mm_setzero_ps(), _mm_set1_ps(score[j])),
                        _mm256_set_m128(_mm_setzero_ps(), rows.load4(j)), a);
  const __m128 sum = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  _mm_storeu_ps(acc, _mm_add_ps(_mm_loadu_ps(acc), sum));
}

// 4 or 8 consecutive cache values as float32: read as they are, or widened
// exactly from fp16 in registers (so both storages give the same arithmetic,
// and fp16 needs no widened copy).
inline __m128 load4(const float* p) { return _mm_loadu_ps(p); }
inline __m128 load4(const uint16_t* p) { return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// A chunk's key or value rows, stride elements apart, stored as T (float or
// fp16). load8(j, i): values [i, i + 8) of row j; load4(j): values [0, 4).
template <class T>
struct Rows {
  const T* base;
  int64_t stride;
  __m256 load8(int32_t j, int32_t i) const { return nexus::load8(base + j * stride + i); }
  __m128 load4(int32_t j) const { return nexus::load4(base + j * stride); }
};
using RowsF32 = Rows<float>;
using RowsF16 = Rows<uint16_t>;

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Running state of the online softmax for one query head. step() folds in
// one chunk of `count` (<= kAttnChunk) keys whose rows are kv_stride apart;
// every variant below feeds the same chunks (positions [16c, 16c + 16)) to
// the same arithmetic, so contiguous and paged caches give identical bits.
struct OnlineSoftmax {
  alignas(32) float acc[kMaxHeadDim];  // [0, head_dim) zeroed by the constructor
  alignas(32) float score[kAttnChunk];
  float m = kNegInf, l = 0.0f;

  OnlineSoftmax() = default;  // reset() before use
  explicit OnlineSoftmax(int32_t head_dim) { reset(head_dim); }
  void reset(int32_t head_dim) {
    std::fill_n(acc, head_dim, 0.0f);
    m = kNegInf;
    l = 0.0f;
  }

  // Rows the SIMD paths read in place (head_dim 4 or a multiple of 8).
  static bool direct(int32_t head_dim) { return head_dim == 4 || head_dim % 8 == 0; }

  // One chunk of float32 rows, any head_dim.
  [[gnu::always_inline]] void step(const float* q, const float* kc, const float* vc, int64_t kv_stride,
                                   int32_t count, int32_t head_dim, float scale) {
    if (direct(head_dim)) return step_rows(q, RowsF32{kc, kv_stride}, RowsF32{vc, kv_stride}, count, head_dim, scale);
    scores_generic(q, kc, kv_stride, count, head_dim, scale, score);
    exp_scores(head_dim);
    for (int32_t j = 0; j < count; ++j)
      for (int32_t i = 0; i < head_dim; ++i) acc[i] += score[j] * vc[j * kv_stride + i];
  }

  // One chunk read through RowsF32 / RowsF16; direct(head_dim) must hold.
  template <class Rows>
  [[gnu::always_inline]] void step_rows(const float* q, const Rows& k, const Rows& v, int32_t count,
                                        int32_t head_dim, float scale) {
    if (head_dim == 4) {
      scores_hd4(q, k, count, scale, score);
      exp_scores(4);
      accumulate_hd4(score, v, count, acc);
      return;
    }
    scores_avx2(q, k, count, head_dim, scale, score);
    exp_scores(head_dim);
    // acc += sum_j score[j] * v_j, 64 dims (eight registers) at a time with
    // the keys inside: eight independent chains rather than one chain of
    // `count` dependent FMAs per 8 dims. Each lane's FMAs keep their order.
    int32_t i = 0;
    for (; i + 64 <= head_dim; i += 64) accumulate_dims<8>(v, count, i);
    switch ((head_dim - i) / 8) {
      case 1: accumulate_dims<1>(v, count, i); break;
      case 2: accumulate_dims<2>(v, count, i); break;
      case 3: accumulate_dims<3>(v, count, i); break;
      case 4: accumulate_dims<4>(v, count, i); break;
      case 5: accumulate_dims<5>(v, count, i); break;
      case 6: accumulate_dims<6>(v, count, i); break;
      case 7: accumulate_dims<7>(v, count, i); break;
      default: break;
    }
  }

  // acc[i0, i0 + 8 * R) += sum_{j < count} score[j] * v_j[i0, i0 + 8 * R).
  template <int R, class Rows>
  [[gnu::always_inline]] void accumulate_dims(const Rows& v, int32_t count, int32_t i0) {
    __m256 a[R];
    for (int r = 0; r < R; ++r) a[r] = _mm256_load_ps(acc + i0 + 8 * r);
    for (int32_t j = 0; j < count; ++j) {
      const __m256 sj = _mm256_set1_ps(score[j]);
#pragma GCC unroll 8  // a[] stays in registers only when unrolled (-O2 does not)
      for (int r = 0; r < R; ++r) a[r] = _mm256_fmadd_ps(sj, v.load8(j, i0 + 8 * r), a[r]);
    }
    for (int r = 0; r < R; ++r) _mm256_store_ps(acc + i0 + 8 * r, a[r]);
  }

  // Given this chunk's scores: the new running maximum (rescaling what was
  // accumulated under the old one), then score[j] = exp(score[j] - m).
  [[gnu::always_inline]] void exp_scores(int32_t head_dim) {
    // Lane-wise over the 16 scores, then across lanes: short dependency
    // chains (a scalar loop is 16 dependent max and add operations).
    const float chunk_max = hmax(_mm256_max_ps(_mm256_load_ps(score), _mm256_load_ps(score + 8)));
    if (chunk_max > m) {
      // exp(-inf) = 0 on the first chunk. exp_nonpos8, not the scalar
      // exp_nonpos, so that the eight-head kernel (same lanes) has the same bits.
      const float correction = _mm256_cvtss_f32(exp_nonpos8(_mm256_set1_ps(m - chunk_max)));
      for (int32_t i = 0; i < head_dim; ++i) acc[i] *= correction;
      l *= correction;
      m = chunk_max;
    }
    const __m256 vm = _mm256_set1_ps(m);  // exp(-inf) = 0 past count: summing all 16 adds exact zeros
    const __m256 e0 = exp_nonpos8(_mm256_sub_ps(_mm256_load_ps(score), vm));
    const __m256 e1 = exp_nonpos8(_mm256_sub_ps(_mm256_load_ps(score + 8), vm));
    _mm256_store_ps(score, e0);
    _mm256_store_ps(score + 8, e1);
    l += hsum(_mm256_add_ps(e0, e1));
  }

  void finish(int32_t head_dim, float* out) const {
    const float inv = 1.0f / l;
    for (int32_t i = 0; i < head_dim; ++i) out[i] = acc[i] * inv;
  }
};

// count (<= kAttnChunk) rows of one head, kv_stride halves apart, widened to
// float32 rows of head_dim values (F16C converts exactly).
void widen_f16(const uint16_t* src, int64_t kv_stride, int32_t count, int32_t head_dim, float* dst) {
  for (int32_t j = 0; j < count; ++j) {
    const uint16_t* s = src + j * kv_stride;
    float* d = dst + j * head_dim;
    int32_t i = 0;
    for (; i + 8 <= head_dim; i += 8)
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    for (; i + 4 <= head_dim; i += 4)
      _mm_storeu_ps(d + i, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + i))));
    for (; i < head_dim; ++i) d[i] = _cvtsh_ss(s[i]);
  }
}

// Like widen_f16 for Q8_0 rows: element e (an arena offset) is q[e] * d[e / 32].
// Each row is walked in runs that share one scale (at most 32 values), so the
// scale is widened once per run and the int8 -> float loop vectorizes.
void widen_q8(const int8_t* base, const uint16_t* scales, int64_t elem, int64_t kv_stride, int32_t count,
              int32_t head_dim, float* dst) {
  for (int32_t j = 0; j < count; ++j) {
    const int64_t e0 = elem + j * kv_stride;
    const int8_t* q = base + e0;
    float* d = dst + j * head_dim;
    int32_t i = 0;
    if (head_dim % 8 == 0 && e0 % 8 == 0) {  // 8 values never straddle a group: one scale each
      for (; i < head_dim; i += 8) {
        const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i))));
        _mm256_storeu_ps(d + i, _mm256_mul_ps(x, _mm256_set1_ps(_cvtsh_ss(scales[(e0 + i) / 32]))));
      }
    }
    while (i < head_dim) {
      const int32_t run = static_cast<int32_t>(std::min<int64_t>(head_dim - i, 32 - (e0 + i) % 32));
      const float scale = _cvtsh_ss(scales[(e0 + i) / 32]);
      for (int32_t k = 0; k < run; ++k) d[i + k] = static_cast<float>(q[i + k]) * scale;
      i += run;
    }
  }
}

// Eight query heads at head_dim 4, "heads in lanes" (attention_heads8_hd4_*
// in attention.h). A register of eight scores comes out of the shuffle tree
// in the order lane 4L + m = head 2m + L; expand(i) is the permutation that
// spreads such a register over value register i (heads 2i, 2i + 1, four
// lanes each).
inline __m256i expand(int32_t i) { return _mm256_setr_epi32(i, i, i, i, i + 4, i + 4, i + 4, i + 4); }

// The 4 + 4 values of query heads 2i and 2i + 1 in the cache row at element
// offset `row` (from the first KV head of the eight): KV heads 2i / group and
// (2i + 1) / group. Widened exactly from fp16, or read as float32.
template <class T>
struct HeadPairs {
  const T* base;
  int32_t group;
  __m256 load(int64_t row, int32_t i) const {
    const T* r = base + row;
    if (group == 1) return load8(r + 8 * i);
    return _mm256_set_m128(load4(r + 4 * ((2 * i + 1) / group)), load4(r + 4 * (2 * i / group)));
  }
};

// The arithmetic of OnlineSoftmax with scores_hd4 and accumulate_hd4, lane
// by lane, in the same order: the same bits as attention_head_paged(_f16)
// run once per head (test_attention checks it).
template <class T>
void heads8_hd4(const float* q, const PagedKv& kv, int32_t n_keys, int32_t group, float scale, float* out) {
  const HeadPairs<T> k{static_cast<const T*>(kv.k), group}, v{static_cast<const T*>(kv.v), group};
  __m256 qv[4], acc[4];
  for (int32_t i = 0; i < 4; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i), acc[i] = _mm256_setzero_ps();
  __m256 m = _mm256_set1_ps(kNegInf), l = _mm256_setzero_ps();
  const __m256 vscale = _mm256_set1_ps(scale);
  alignas(32) float e[kAttnChunk][8];  // scores of the chunk's positions, then their exponentials
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    const int64_t off = kv.block_table[p0 / kv.block_size] * kv.block_stride + (p0 % kv.block_size) * kv.kv_stride;
    __m256 chunk_max = _mm256_set1_ps(kNegInf);
    for (int32_t j = 0; j < count; ++j) {
      const int64_t row = off + j * kv.kv_stride;
      __m256 p[4];
      for (int32_t i = 0; i < 4; ++i) p[i] = _mm256_mul_ps(k.load(row, i), qv[i]);
      // Per 128-bit lane: (x0 + x1) + (x2 + x3) of each head, as the hadd tree.
      const __m256 ab = _mm256_add_ps(_mm256_shuffle_ps(p[0], p[1], 0x88), _mm256_shuffle_ps(p[0], p[1], 0xDD));
      const __m256 cd = _mm256_add_ps(_mm256_shuffle_ps(p[2], p[3], 0x88), _mm256_shuffle_ps(p[2], p[3], 0xDD));
      const __m256 sc =
          _mm256_mul_ps(_mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x88), _mm256_shuffle_ps(ab, cd, 0xDD)), vscale);
      _mm256_store_ps(e[j], sc);
      chunk_max = _mm256_max_ps(chunk_max, sc);
    }
    // Heads whose maximum grew rescale what they hold (a factor of 1 elsewhere).
    const __m256 grew = _mm256_cmp_ps(chunk_max, m, _CMP_GT_OQ);
    const __m256 corr = _mm256_blendv_ps(_mm256_set1_ps(1.0f), exp_nonpos8(_mm256_sub_ps(m, chunk_max)), grew);
    m = _mm256_blendv_ps(m, chunk_max, grew);
    l = _mm256_mul_ps(l, corr);
    for (int32_t i = 0; i < 4; ++i) acc[i] = _mm256_mul_ps(acc[i], _mm256_permutevar8x32_ps(corr, expand(i)));
    for (int32_t j = 0; j < kAttnChunk; ++j)
      _mm256_store_ps(e[j], j < count ? exp_nonpos8(_mm256_sub_ps(_mm256_load_ps(e[j]), m)) : _mm256_setzero_ps());
    // l += the chunk's sum, in hsum's order over positions.
    __m256 s[8];
    for (int32_t j = 0; j < 8; ++j) s[j] = _mm256_add_ps(_mm256_load_ps(e[j]), _mm256_load_ps(e[j + 8]));
    for (int32_t j = 0; j < 4; ++j) s[j] = _mm256_add_ps(s[j], s[j + 4]);
    l = _mm256_add_ps(l, _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3])));
    // Even and odd positions in two chains, summed at the end, as
    // accumulate_hd4; the four value registers' chains interleaved.
    __m256 even[4], odd[4];
    for (int32_t i = 0; i < 4; ++i) even[i] = odd[i] = _mm256_setzero_ps();
    for (int32_t j = 0; j < count; ++j) {
      const __m256 ej = _mm256_load_ps(e[j]);
      const int64_t row = off + j * kv.kv_stride;
      __m256* chain = j % 2 == 0 ? even : odd;
      for (int32_t i = 0; i < 4; ++i)
        chain[i] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(ej, expand(i)), v.load(row, i), chain[i]);
    }
    for (int32_t i = 0; i < 4; ++i) acc[i] = _mm256_add_ps(acc[i], _mm256_add_ps(even[i], odd[i]));
  }
  const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), l);
  for (int32_t i = 0; i < 4; ++i)
    _mm256_storeu_ps(out + 8 * i, _mm256_mul_ps(acc[i], _mm256_permutevar8x32_ps(inv, expand(i))));
}

// Eight query heads at head_dim 8, "heads in lanes" for the online softmax
// (attention_heads8_paged* in attention.h): a register per head holds its
// eight products, the hadd tree of scores_avx2 sums them with heads where
// scores_avx2 has keys, and the softmax state (m, l) and each position's
// exponentials hold one head per lane. Every head sees the operations of
// attention_head_paged(_f16) in their order: the same bits.
template <class T>
void heads8_hd8(const float* q, const PagedKv& kv, int32_t n_keys, int32_t group, float scale, float* out) {
  const T* kb = static_cast<const T*>(kv.k);
  const T* vb = static_cast<const T*>(kv.v);
  __m256 qv[8], acc[8];
  for (int32_t h = 0; h < 8; ++h) qv[h] = _mm256_loadu_ps(q + 8 * h), acc[h] = _mm256_setzero_ps();
  __m256 m = _mm256_set1_ps(kNegInf), l = _mm256_setzero_ps();
  const __m256 vscale = _mm256_set1_ps(scale);
  alignas(32) float e[kAttnChunk][8];  // scores of the chunk's positions, then their exponentials
  alignas(32) float corr_h[8];
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    const int64_t off = kv.block_table[p0 / kv.block_size] * kv.block_stride + (p0 % kv.block_size) * kv.kv_stride;
    __m256 chunk_max = _mm256_set1_ps(kNegInf);
    for (int32_t j = 0; j < count; ++j) {
      const T* row = kb + off + j * kv.kv_stride;
      __m256 p[8];
      for (int32_t h = 0; h < 8; ++h) p[h] = _mm256_fmadd_ps(qv[h], load8(row + 8 * (h / group)), _mm256_setzero_ps());
      const __m256 h0123 = _mm256_hadd_ps(_mm256_hadd_ps(p[0], p[1]), _mm256_hadd_ps(p[2], p[3]));
      const __m256 h4567 = _mm256_hadd_ps(_mm256_hadd_ps(p[4], p[5]), _mm256_hadd_ps(p[6], p[7]));
      const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                                        _mm256_permute2f128_ps(h0123, h4567, 0x31));
      const __m256 sc = _mm256_mul_ps(sums, vscale);
      _mm256_store_ps(e[j], sc);
      chunk_max = _mm256_max_ps(chunk_max, sc);
    }
    // Heads whose maximum grew rescale what they hold (a factor of 1 elsewhere).
    const __m256 grew = _mm256_cmp_ps(chunk_max, m, _CMP_GT_OQ);
    const __m256 corr = _mm256_blendv_ps(_mm256_set1_ps(1.0f), exp_nonpos8(_mm256_sub_ps(m, chunk_max)), grew);
    m = _mm256_blendv_ps(m, chunk_max, grew);
    l = _mm256_mul_ps(l, corr);
    _mm256_store_ps(corr_h, corr);
    for (int32_t h = 0; h < 8; ++h) acc[h] = _mm256_mul_ps(acc[h], _mm256_broadcast_ss(corr_h + h));
    for (int32_t j = 0; j < kAttnChunk; ++j)
      _mm256_store_ps(e[j], j < count ? exp_nonpos8(_mm256_sub_ps(_mm256_load_ps(e[j]), m)) : _mm256_setzero_ps());
    // l += the chunk's sum, in hsum's order over positions.
    __m256 s[8];
    for (int32_t j = 0; j < 8; ++j) s[j] = _mm256_add_ps(_mm256_load_ps(e[j]), _mm256_load_ps(e[j + 8]));
    for (int32_t j = 0; j < 4; ++j) s[j] = _mm256_add_ps(s[j], s[j + 4]);
    l = _mm256_add_ps(l, _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3])));
    // One FMA chain per head over the positions, as accumulate_dims<1>; the
    // eight heads' chains interleaved.
    for (int32_t j = 0; j < count; ++j) {
      const T* row = vb + off + j * kv.kv_stride;
      for (int32_t h = 0; h < 8; ++h)
        acc[h] = _mm256_fmadd_ps(_mm256_broadcast_ss(&e[j][h]), load8(row + 8 * (h / group)), acc[h]);
    }
  }
  alignas(32) float inv[8];
  _mm256_store_ps(inv, _mm256_div_ps(_mm256_set1_ps(1.0f), l));
  for (int32_t h = 0; h < 8; ++h) _mm256_storeu_ps(out + 8 * h, _mm256_mul_ps(acc[h], _mm256_broadcast_ss(inv + h)));
}

}  // namespace

void attention_head(const float* q, const float* k, const float* v, int64_t kv_stride, int32_t n_keys,
                    int32_t head_dim, float scale, float* out) {
  OnlineSoftmax s(head_dim);
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    s.step(q, k + p0 * kv_stride, v + p0 * kv_stride, kv_stride, count, head_dim, scale);
  }
  s.finish(head_dim, out);
}

void attention_head_paged(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, float scale,
                          float* out) {
  OnlineSoftmax s(head_dim);
  const auto* k = static_cast<const float*>(kv.k);
  const auto* v = static_cast<const float*>(kv.v);
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    const int64_t off = kv.block_table[p0 / kv.block_size] * kv.block_stride + (p0 % kv.block_size) * kv.kv_stride;
    s.step(q, k + off, v + off, kv.kv_stride, count, head_dim, scale);
  }
  s.finish(head_dim, out);
}

void attention_head_paged_f16(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, float scale,
                              float* out) {
  OnlineSoftmax s(head_dim);
  alignas(32) float kc[kAttnChunk * kMaxHeadDim], vc[kAttnChunk * kMaxHeadDim];
  const auto* k = static_cast<const uint16_t*>(kv.k);
  const auto* v = static_cast<const uint16_t*>(kv.v);
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    const int64_t off = kv.block_table[p0 / kv.block_size] * kv.block_stride + (p0 % kv.block_size) * kv.kv_stride;
    if (OnlineSoftmax::direct(head_dim)) {  // widened in registers, no copy
      s.step_rows(q, RowsF16{k + off, kv.kv_stride}, RowsF16{v + off, kv.kv_stride}, count, head_dim, scale);
      continue;
    }
    widen_f16(k + off, kv.kv_stride, count, head_dim, kc);
    widen_f16(v + off, kv.kv_stride, count, head_dim, vc);
    s.step(q, kc, vc, head_dim, count, head_dim, scale);
  }
  s.finish(head_dim, out);
}

void attention_head_paged_q8(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, float scale,
                             float* out) {
  OnlineSoftmax s(head_dim);
  alignas(32) float kc[kAttnChunk * kMaxHeadDim], vc[kAttnChunk * kMaxHeadDim];
  // Element offsets are relative to the arena: k/v point at elem0 within it.
  const int8_t* k_base = static_cast<const int8_t*>(kv.k) - kv.k_elem0;
  const int8_t* v_base = static_cast<const int8_t*>(kv.v) - kv.v_elem0;
  for (int32_t p0 = 0; p0 < n_keys; p0 += kAttnChunk) {
    const int32_t count = std::min(kAttnChunk, n_keys - p0);
    const int64_t off = kv.block_table[p0 / kv.block_size] * kv.block_stride + (p0 % kv.block_size) * kv.kv_stride;
    widen_q8(k_base, kv.scales, kv.k_elem0 + off, kv.kv_stride, count, head_dim, kc);
    widen_q8(v_base, kv.scales, kv.v_elem0 + off, kv.kv_stride, count, head_dim, vc);
    s.step(q, kc, vc, head_dim, count, head_dim, scale);
  }
  s.finish(head_dim, out);
}

void attention_rows_paged(std::span<const AttnRow> rows, const PagedKv& kv, KvElem elem, int32_t head_dim,
                          float scale) {
  // Rows are taken kMaxRows at a time: their states (~1.1 KB each, on this
  // thread once) and the widened chunk (2 x 16 KB at most) stay in L2.
  constexpr size_t kMaxRows = 64;
  thread_local std::vector<OnlineSoftmax> states(kMaxRows);
  alignas(32) float kc[kAttnChunk * kMaxHeadDim], vc[kAttnChunk * kMaxHeadDim];
  const auto* k32 = static_cast<const float*>(kv.k);
  const auto* v32 = static_cast<const float*>(kv.v);
  const auto* k16 = static_cast<const uint16_t*>(kv.k);
  const auto* v16 = static_cast<const uint16_t*>(kv.v);
  // Q8_0 element offsets are relative to the arena: k/v point at elem0 within it.
  const int8_t* k8 = static_cast<const int8_t*>(kv.k) - kv.k_elem0;
  const int8_t* v8 = static_cast<const int8_t*>(kv.v) - kv.v_elem0;
  for (size_t r0 = 0; r0 < rows.size(); r0 += kMaxRows) {
    const std::span<const AttnRow> part = rows.subspan(r0, std::min(kMaxRows, rows.size() - r0));
    int32_t max_keys = 0;
    for (size_t i = 0; i < part.size(); ++i) {
      states[i].reset(head_dim);
      max_keys = std::max(max_keys, part[i].n_keys);
    }
    for (int32_t p0 = 0; p0 < max_keys; p0 += kAttnChunk) {
      const int32_t count = std::min(kAttnChunk, max_keys - p0);
      const int64_t off = kv.block_table[p0 / kv.block_size] * kv.block_stride + (p0 % kv.block_size) * kv.kv_stride;
      // The chunk as float32 rows: read in place, or widened exactly (the
      // per-head fp16 kernel widens the same values in registers).
      const float *kr = kc, *vr = vc;
      int64_t stride = head_dim;
      switch (elem) {
        case KvElem::F32: kr = k32 + off, vr = v32 + off, stride = kv.kv_stride; break;
        case KvElem::F16:
          widen_f16(k16 + off, kv.kv_stride, count, head_dim, kc);
          widen_f16(v16 + off, kv.kv_stride, count, head_dim, vc);
          break;
        case KvElem::Q8_0:
          widen_q8(k8, kv.scales, kv.k_elem0 + off, kv.kv_stride, count, head_dim, kc);
          widen_q8(v8, kv.scales, kv.v_elem0 + off, kv.kv_stride, count, head_dim, vc);
          break;
      }
      for (size_t i = 0; i < part.size(); ++i)
        if (part[i].n_keys > p0)
          states[i].step(part[i].q, kr, vr, stride, std::min(kAttnChunk, part[i].n_keys - p0), head_dim, scale);
    }
    for (size_t i = 0; i < part.size(); ++i) states[i].finish(head_dim, part[i].out);
  }
}

void attention_heads8_paged(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, int32_t group,
                            float scale, float* out) {
  if (head_dim == 4) heads8_hd4<float>(q, kv, n_keys, group, scale, out);
  else heads8_hd8<float>(q, kv, n_keys, group, scale, out);
}

void attention_heads8_paged_f16(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, int32_t group,
                                float scale, float* out) {
  if (head_dim == 4) heads8_hd4<uint16_t>(q, kv, n_keys, group, scale, out);
  else heads8_hd8<uint16_t>(q, kv, n_keys, group, scale, out);
}

bool attention_heads16_hd4_supported() { return cpu_features().avx512; }

void attention_heads16_hd4_paged(const float* q, const PagedKv& kv, int32_t n_keys, float scale, float* out) {
  attention_heads16_hd4_paged_avx512(q, kv, n_keys, scale, out);
}

void attention_heads16_hd4_paged_f16(const float* q, const PagedKv& kv, int32_t n_keys, float scale, float* out) {
  attention_heads16_hd4_paged_f16_avx512(q, kv, n_keys, scale, out);
}

}  // namespace nexus
