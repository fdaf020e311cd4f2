// K-quant decode kernels with AVX2 (gemm_kquants.h); baseline flags
// (-march=x86-64-v3: AVX2, FMA, F16C).
//
// Per weight row, tiles of up to kTile tokens; per super-block of the row:
//   weight: the 256 values as unsigned bytes u, 32 to a register in the
//     activations' order (Q2_K 0..3; Q3_K q + 4, 0..7; Q4_K 0..15; Q5_K
//     0..31; Q6_K q + 32, 0..63), and per 32 values an int16 vector of their
//     sub-block scales;
//   per token: per 32 values maddubs(u, x_q) (int16 pairs; at most
//     63 * 127 * 2 < 2^15, so never saturated) and madd with the scales,
//     summed into one int32 vector; the mins (Q2_K, Q4_K, Q5_K) as madd of
//     the bsums with the mins; Q3_K's and Q6_K's offsets (q = u - 4, u - 32)
//     as madd of the bsums with the scales, times 4 or 32, subtracted;
//   then each token's int32 vectors reduced to exact sums (an hadd tree),
//     token t in lane t of one 128-bit register, so the float work of the
//     tile is two vfmadd, the reference's two fused multiply-adds (one
//     token: isum and msum reduced together, to lanes 0 and 1).
// Every integer is exact, so each (row, token) gets gemm_ref's bits whatever
// the tile size, token count or row range.
#include "kernels/x86/gemm_kquants.h"

#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "kernels/act_quant.h"
#include "kernels/quant_blocks.h"

// GCC's temporary expression replacement (TER) turns each token's chain of
// adds into one expression evaluated at its end, keeping every product
// alive: the 4-token tiles spilled ~430 ymm loads and stores (GCC 12), none
// without it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-ter")
#endif

namespace nexus {
namespace {

constexpr int kTile = 4;  // tokens per tile: one 128-bit lane each

// How far ahead of its loads a row's weight stream is prefetched into L1:
// gemm_body.h's distance for the 256-bit kernels (measured there on Q4_0 /
// Q8_0 decode), which these kernels share in shape.
constexpr size_t kPrefetchBytes = 2048;

using Act = const BlockQ8K*;

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// Each 16-bit lane shifted left by s (right by -s); callers mask per byte,
// which is exact for the shifts they use (no byte takes bits of its
// neighbour under the mask). The loops calling these and the ones below are
// fully unrolled (#pragma GCC unroll, which clang honours too), so counts
// and indices are constants.
inline __m256i shift16(__m256i v, int s) {
  return s > 0 ? _mm256_slli_epi16(v, s) : s < 0 ? _mm256_srli_epi16(v, -s) : v;
}

// isum[t] += scale * (u . x_q) over the 32 values at `off` of token t.
template <int T>
inline void add_chunk(__m256i u, __m256i scale, const Act* xb, int off, __m256i* isum) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i p = _mm256_maddubs_epi16(u, load32(xb[t]->qs + off));
    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(scale, p));
  }
}

// Sub-blocks of 16 (Q2_K, Q3_K, Q6_K): the scales of values 32 M .. 32 M + 31
// as int16, sc[2 M] in lanes 0..7 and sc[2 M + 1] in 8..15; sc: 16 int8.
inline __m256i chunk_scales16(__m128i sc, int m) {
  constexpr long long kOnes = 0x0101010101010101LL;
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, _mm_set_epi64x(kOnes * (2 * m + 1), kOnes * (2 * m))));
}

// Q4_K / Q5_K: the 8 scales and 8 mins as bytes, sub-block k's scale at
// byte k + 4 (k / 4) and its min 4 bytes later: [sc0..3, mn0..3, sc4..7,
// mn4..7] (layout: kquant_unpack.h's unpack_q4k_scales). Reads 16 bytes,
// the 12 of `packed` and 4 of the block after them.
inline __m128i q4k_scales_mins(const uint8_t* packed) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));  // words w0, w1, w2
  const __m128i low6 = _mm_and_si128(v, _mm_set1_epi8(0x3f));                  // sc0..3, mn0..3
  // Words 2, 3: the top 2 bits (bits 6-7 of w0, w1) to bits 4-5, and the
  // low nibbles (w2 & 0xf for the scales, w2 >> 4 for the mins).
  const __m128i top = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 1, 0)), 2), _mm_set1_epi8(0x30));
  const __m128i nib = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 2, 2)), _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_set1_epi8(0x0f));
  return _mm_blend_epi32(low6, _mm_or_si128(top, nib), 0b1100);
}

// From q4k_scales_mins in both 128-bit halves: scale j as int16 in every lane
// (pshufb index 0x80 zeroes the high byte).
inline __m256i chunk_scale32(__m256i sm, int j) {
  return _mm256_shuffle_epi8(sm, _mm256_set1_epi16(static_cast<short>(0x8000 | (j + 4 * (j / 4)))));
}
// ... and the mins as int16 pairs m0, m0, m1, m1, .., m7, m7 (one per bsum).
inline __m256i mins_per_bsum(__m256i sm) {
  const __m256i idx = _mm256_setr_epi16(
      short(0x8004), short(0x8004), short(0x8005), short(0x8005), short(0x8006), short(0x8006), short(0x8007),
      short(0x8007), short(0x800c), short(0x800c), short(0x800d), short(0x800d), short(0x800e), short(0x800e),
      short(0x800f), short(0x800f));
  return _mm256_shuffle_epi8(sm, idx);
}

// Q3_K: the 16 scales as int8, stored value - 32 (unpack_q3k_scales).
inline __m128i q3k_scales(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, 12);
  const uint32_t s0 = (w[0] & 0x0f0f0f0f) | (w[2] & 0x03030303) << 4;
  const uint32_t s1 = (w[1] & 0x0f0f0f0f) | ((w[2] >> 2) & 0x03030303) << 4;
  const uint32_t s2 = ((w[0] >> 4) & 0x0f0f0f0f) | ((w[2] >> 4) & 0x03030303) << 4;
  const uint32_t s3 = ((w[1] >> 4) & 0x0f0f0f0f) | ((w[2] >> 6) & 0x03030303) << 4;
  const __m128i v = _mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1),
                                  static_cast<int>(s0));
  return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// Per type: dot<T>(block, tokens' blocks, isum, msum) adds each token's
// scale sum to isum[t] (zeroed by the caller) and, for types with mins,
// sets msum[t] (lanes sum to sum_s min[s] * bsums[s]).

struct Q2K {
  using Block = BlockQ2_K;
  static constexpr bool kHasMin = true;
  template <int T>
  static void dot(const Block& b, const Act* xb, __m256i* isum, __m256i* msum) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i sc = _mm_and_si128(raw, _mm_set1_epi8(0x0f));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0f)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load32(b.qs + 32 * h);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i u = _mm256_and_si256(shift16(q, -2 * j), bytes(3));
        add_chunk<T>(u, chunk_scales16(sc, 4 * h + j), xb, 128 * h + 32 * j, isum);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) msum[t] = _mm256_madd_epi16(load32(xb[t]->bsums), mins);
  }
};

struct Q3K {
  using Block = BlockQ3_K;
  static constexpr bool kHasMin = false;
  template <int T>
  static void dot(const Block& b, const Act* xb, __m256i* isum, __m256i*) {
    const __m128i sc = q3k_scales(b.scales);
    const __m256i hm = load32(b.hmask);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load32(b.qs + 32 * h);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // u = low 2 bits + 4 * (bit 4 h + j of hmask), i.e. q + 4.
        const __m256i low = _mm256_and_si256(shift16(q, -2 * j), bytes(3));
        const __m256i high = _mm256_and_si256(shift16(hm, 2 - (4 * h + j)), bytes(4));
        add_chunk<T>(_mm256_or_si256(low, high), chunk_scales16(sc, 4 * h + j), xb, 128 * h + 32 * j, isum);
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(_mm256_madd_epi16(load32(xb[t]->bsums), sc16), 2));
  }
};

// Q4_K and Q5_K: chunk c's 32 bytes hold values 64 c .. 64 c + 31 (low
// nibbles, sub-block 2 c) and 64 c + 32 .. 64 c + 63 (high, 2 c + 1); Q5_K's
// fifth bit of sub-block k is bit k of qh.
template <class B, bool kFifthBit>
struct Q45K {
  using Block = B;
  static constexpr bool kHasMin = true;
  template <int T>
  static void dot(const Block& b, const Act* xb, __m256i* isum, __m256i* msum) {
    const __m256i sm = _mm256_broadcastsi128_si256(q4k_scales_mins(b.scales));
    const __m256i mins = mins_per_bsum(sm);
    const __m256i low4 = bytes(0x0f);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFifthBit) qh = load32(b.qh);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load32(b.qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kFifthBit) {
        lo = _mm256_or_si256(lo, _mm256_and_si256(shift16(qh, 4 - 2 * c), bytes(0x10)));
        hi = _mm256_or_si256(hi, _mm256_and_si256(shift16(qh, 3 - 2 * c), bytes(0x10)));
      }
      add_chunk<T>(lo, chunk_scale32(sm, 2 * c), xb, 64 * c, isum);
      add_chunk<T>(hi, chunk_scale32(sm, 2 * c + 1), xb, 64 * c + 32, isum);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) msum[t] = _mm256_madd_epi16(load32(xb[t]->bsums), mins);
  }
};
using Q4K = Q45K<BlockQ4_K, false>;
using Q5K = Q45K<BlockQ5_K, true>;

struct Q6K {
  using Block = BlockQ6_K;
  static constexpr bool kHasMin = false;
  template <int T>
  static void dot(const Block& b, const Act* xb, __m256i* isum, __m256i*) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m256i low4 = bytes(0x0f), top2 = bytes(0x30);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i a = load32(b.ql + 64 * h), c = load32(b.ql + 64 * h + 32), qh = load32(b.qh + 32 * h);
      // Values 128 h + 32 k + l: nibble k / 2 of (k even ? a : c)[l], bits 2 k .. 2 k + 1 of qh[l] above it.
      const __m256i u0 = _mm256_or_si256(_mm256_and_si256(a, low4), _mm256_and_si256(shift16(qh, 4), top2));
      const __m256i u1 = _mm256_or_si256(_mm256_and_si256(c, low4), _mm256_and_si256(shift16(qh, 2), top2));
      const __m256i u2 =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), _mm256_and_si256(qh, top2));
      const __m256i u3 =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low4), _mm256_and_si256(shift16(qh, -2), top2));
      add_chunk<T>(u0, chunk_scales16(sc, 4 * h + 0), xb, 128 * h + 0, isum);
      add_chunk<T>(u1, chunk_scales16(sc, 4 * h + 1), xb, 128 * h + 32, isum);
      add_chunk<T>(u2, chunk_scales16(sc, 4 * h + 2), xb, 128 * h + 64, isum);
      add_chunk<T>(u3, chunk_scales16(sc, 4 * h + 3), xb, 128 * h + 96, isum);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(_mm256_madd_epi16(load32(xb[t]->bsums), sc16), 5));
  }
};

// Lane t = the sum of v[t]'s eight int32 lanes (exact), t < T.
template <int T>
inline __m128i reduce(const __m256i* v) {
  if constexpr (T == 1) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v[0]), _mm256_extracti128_si256(v[0], 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  } else {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i p = _mm256_hadd_epi32(v[0], v[1]);
    __m256i q = zero;
    if constexpr (T == 3) q = _mm256_hadd_epi32(v[2], zero);
    if constexpr (T == 4) q = _mm256_hadd_epi32(v[2], v[3]);
    // Lanes t and 4 + t of hadd(p, q) hold the halves of token t's sum.
    const __m256i s = _mm256_hadd_epi32(p, q);
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  }
}

// One weight row against T tokens (token t's blocks at x + t * nb) into
// y[t * ldy].
template <class K, int T>
void tile(const typename K::Block* wb, int64_t nb, const BlockQ8K* x, float* y, int64_t ldy) {
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    // Past the row's end this touches the next row or memory after the
    // matrix: a prefetch never faults.
    const char* pf = reinterpret_cast<const char*>(wb + b) + kPrefetchBytes;
    for (size_t i = 0; i < sizeof(typename K::Block); i += 64) _mm_prefetch(pf + i, _MM_HINT_T0);
    Act xb[T];
    alignas(16) float dx[4] = {};
    __m256i isum[T], msum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xb[t] = x + t * nb + b;
      dx[t] = xb[t]->d;
      isum[t] = _mm256_setzero_si256();
    }
    K::template dot<T>(wb[b], xb, isum, msum);
    if constexpr (T == 1 && K::kHasMin) {
      // One token: isum and msum reduced together to lanes 0 and 1, and
      // d, dmin (adjacent fp16) scaled at once; lane 0 carries the result.
      static_assert(offsetof(typename K::Block, dmin) == offsetof(typename K::Block, d) + 2);
      int32_t dpair;
      std::memcpy(&dpair, &wb[b].d, 4);
      const __m128 dm = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(dpair)), _mm_set1_ps(dx[0]));
      const __m128 scale = _mm_xor_ps(dm, _mm_setr_ps(0.0f, -0.0f, 0.0f, 0.0f));  // d x.d, -(dmin x.d)
      const __m256i h = _mm256_hadd_epi32(isum[0], msum[0]);
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      const __m128 sums = _mm_cvtepi32_ps(_mm_hadd_epi32(s4, s4));  // isum, msum
      acc = _mm_fmadd_ss(scale, sums, acc);
      acc = _mm_fmadd_ss(_mm_movehdup_ps(scale), _mm_movehdup_ps(sums), acc);
    } else {
      const __m128 vdx = _mm_load_ps(dx);
      const __m128 dd = _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(wb[b].d)), vdx);
      acc = _mm_fmadd_ps(dd, _mm_cvtepi32_ps(reduce<T>(isum)), acc);
      if constexpr (K::kHasMin) {
        const __m128 dm = _mm_mul_ps(_mm_set1_ps(-_cvtsh_ss(wb[b].dmin)), vdx);
        acc = _mm_fmadd_ps(dm, _mm_cvtepi32_ps(reduce<T>(msum)), acc);
      }
    }
  }
  alignas(16) float out[4];
  _mm_store_ps(out, acc);
  for (int t = 0; t < T; ++t) y[t * ldy] = out[t];
}

template <class K>
void kquant_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x,
                 int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t nb = n_cols / kQK_K;
  const auto* act = static_cast<const BlockQ8K*>(x);
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const typename K::Block*>(w + r * row_bytes);
    int64_t t = 0;
    for (; t + kTile <= n_tokens; t += kTile) tile<K, kTile>(wb, nb, act + t * nb, y + t * ldy + r, ldy);
    switch (n_tokens - t) {
      case 3: tile<K, 3>(wb, nb, act + t * nb, y + t * ldy + r, ldy); break;
      case 2: tile<K, 2>(wb, nb, act + t * nb, y + t * ldy + r, ldy); break;
      case 1: tile<K, 1>(wb, nb, act + t * nb, y + t * ldy + r, ldy); break;
      default: break;
    }
  }
}

}  // namespace

#define NEXUS_KQUANT_AVX2(name, K)                                                                              \
  void gemm_##name##_avx2(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x, \
                          int64_t n_tokens, float* y, int64_t ldy) {                                               \
    kquant_rows<K>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);                                             \
  }
NEXUS_KQUANT_AVX2(q2_k, Q2K)
NEXUS_KQUANT_AVX2(q3_k, Q3K)
NEXUS_KQUANT_AVX2(q4_k, Q4K)
NEXUS_KQUANT_AVX2(q5_k, Q5K)
NEXUS_KQUANT_AVX2(q6_k, Q6K)
#undef NEXUS_KQUANT_AVX2

}  // namespace nexus
