// Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS decode kernels with AVX2 + FMA + F16C
// (gemm_legacy.h). One 32-value block (or IQ4_XS sub-block) fills one 256-bit
// register in the activations' order: byte j = value j (the low nibbles are
// values 0..15, the high ones 16..31).
//
// Integer products are u8 x s8 (vpmaddubsw, pairs into int16, then vpmaddwd
// into int32), so each type presents its weights unsigned, or moves the sign:
//   Q4_1, Q5_1: the values 0..15 / 0..31 are unsigned already;
//   Q5_0:       (q - 16) . x = q . x - 16 * qsum, q in 0..31 unsigned;
//   IQ4_NL/XS:  levels -127..113 are signed: |w| . sign(x, w) (vpsignb),
//               as a +128 shift would saturate vpmaddubsw's int16 pairs
//               (2 * 241 * 127 > 32767); 2 * 127 * 127 does not.
// Q4_1 / Q5_1 add m_w * (d_x * qsum) per block into lane 0 of a third
// accumulator. IQ4_XS folds each sub-block's scale into vpmaddwd (the int16
// pairs times (scale - 32) instead of 1), sums the super-block exactly in
// int32 (|sum| < 2^24, so its conversion is exact too) and scales it once.
//
// Measured (scratch loop, 1 thread, CPU time, 1 token, 4096 x 4096 weight
// from L3; the shared 2-core AMD EPYC VM, ranges of 3-5 runs): Q4_1 8-12,
// Q5_0 8-13, Q5_1 8-11, IQ4_NL 9-12, IQ4_XS 7-12 GB/s; gemm_body.h's Q4_0
// 10-14 in the same runs. 4 tokens: 3.3-4.2 GB/s of weight.
//
// Determinism: each (row, token) has its own accumulators (even and odd
// blocks or super-blocks, min terms), sees the same operations in the same
// order in a 4-token or a 1-token tile, and is reduced the same way.
#include <immintrin.h>

#include <cstring>

#include "kernels/act_quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/simd256.h"
#include "kernels/x86/gemm_legacy.h"

namespace nexus {
namespace {

constexpr int kTokens = 4;  // tokens per register tile
// Weight bytes prefetched ahead into L1, as the Q4_0 / Q8_0 kernels of
// gemm_body.h (measured there).
constexpr size_t kPrefetchBytes = 2048;


inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 bytes of nibbles -> 32 bytes 0..15: low nibbles in the low 128 bits.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
}

// Byte j = 0x10 where bit j of the block's qh is set (the fifth bits).
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte j <- byte j / 8 of qh (vpshufb stays in each 128-bit half; both hold all of qh).
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// IQ4 levels of 32 nibbles (signed).
inline __m256i iq4_levels(const uint8_t* qs) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  return _mm256_shuffle_epi8(table, nibbles(qs));
}

// u8 x s8 -> int32 lanes. No int16 saturation for u <= 127 (or u <= 31 with
// |s| <= 127): 2 * 127 * 127 < 2^15.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The min term m_w * (d_x * qsum) in lane 0, zeros elsewhere.
inline __m256 min_term(const BlockQ8Act& x) {
  return _mm256_zextps128_ps256(_mm_set_ss(x.d * static_cast<float>(x.qsum)));
}

// The per-token step of the types with a minimum (Q4_1, Q5_1): levels q
// (u8) against each token's block into acc, m times its d * sum into mins.
template <int T>
inline void tokens_with_min(__m256i q, float dw, __m256 mw, const BlockQ8Act* xb, int64_t stride, __m256* acc,
                            __m256* mins) {
#pragma GCC unroll 4  // keeps the T accumulators in registers
  for (int t = 0; t < T; ++t) {
    const BlockQ8Act& x = xb[t * stride];
    const __m256 p = _mm256_cvtepi32_ps(dot_u8s8(q, load32(x.qs)));
    acc[t] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw * x.d), acc[t]);
    mins[t] = _mm256_fmadd_ps(mw, min_term(x), mins[t]);
  }
}

// Per type: the block and one step (one block of one weight row against T
// tokens' blocks, `stride` blocks apart) into acc[0..T); Q4_1 / Q5_1's min
// terms into mins[0..T), a chain of their own (measured, 1 token: Q4_1 9.3
// -> 11.5 GB/s from L3 against one FMA chain for both).
struct Q4_1 {
  using Block = BlockQ4_1;
  using Act = BlockQ8Act;
  template <int T>
  static void step(const Block& wb, const Act* xb, int64_t stride, __m256* acc, __m256* mins) {
    const __m256i q = nibbles(wb.qs);
    const float dw = half_to_float(wb.d);
    const __m256 mw = _mm256_set1_ps(half_to_float(wb.m));
    tokens_with_min<T>(q, dw, mw, xb, stride, acc, mins);
  }
};

struct Q5_1 {
  using Block = BlockQ5_1;
  using Act = BlockQ8Act;
  template <int T>
  static void step(const Block& wb, const Act* xb, int64_t stride, __m256* acc, __m256* mins) {
    const __m256i q = _mm256_or_si256(nibbles(wb.qs), fifth_bits(wb.qh));
    const float dw = half_to_float(wb.d);
    const __m256 mw = _mm256_set1_ps(half_to_float(wb.m));
    tokens_with_min<T>(q, dw, mw, xb, stride, acc, mins);
  }
};

struct Q5_0 {
  using Block = BlockQ5_0;
  using Act = BlockQ8Act;
  template <int T>
  static void step(const Block& wb, const Act* xb, int64_t stride, __m256* acc, __m256* /*mins*/) {
    const __m256i q = _mm256_or_si256(nibbles(wb.qs), fifth_bits(wb.qh));  // value + 16
    const float dw = half_to_float(wb.d);
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t) {
      const Act& x = xb[t * stride];
      __m256i s = dot_u8s8(q, load32(x.qs));
      s = _mm256_sub_epi32(s, _mm256_setr_epi32(16 * x.qsum, 0, 0, 0, 0, 0, 0, 0));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * x.d), acc[t]);
    }
  }
};

struct Iq4Nl {
  using Block = BlockIq4Nl;
  using Act = BlockQ8Act;
  template <int T>
  static void step(const Block& wb, const Act* xb, int64_t stride, __m256* acc, __m256* /*mins*/) {
    const __m256i v = iq4_levels(wb.qs);
    const __m256i av = _mm256_sign_epi8(v, v);
    const float dw = half_to_float(wb.d);
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t) {
      const Act& x = xb[t * stride];
      const __m256i s = dot_u8s8(av, _mm256_sign_epi8(load32(x.qs), v));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * x.d), acc[t]);
    }
  }
};

struct Iq4Xs {
  using Block = BlockIq4Xs;
  using Act = BlockQ8K;
  template <int T>
  static void step(const Block& wb, const Act* xb, int64_t stride, __m256* acc, __m256* /*mins*/) {
    __m256i isum[T];
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    uint32_t lo;
    std::memcpy(&lo, wb.scales_l, 4);
    for (int ib = 0; ib < 8; ++ib) {
      const int scale = static_cast<int>(((lo >> (4 * ib)) & 0x0f) | ((wb.scales_h >> (2 * ib)) & 3) << 4) - 32;
      const __m256i sc = _mm256_set1_epi16(static_cast<short>(scale));
      const __m256i v = iq4_levels(wb.qs + 16 * ib);
      const __m256i av = _mm256_sign_epi8(v, v);
#pragma GCC unroll 4  // keeps the T accumulators in registers
      for (int t = 0; t < T; ++t) {
        const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(load32(xb[t * stride].qs + 32 * ib), v));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, sc));
      }
    }
    const float dw = half_to_float(wb.d);
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(dw * xb[t * stride].d), acc[t]);
  }
};

// One weight row against T tokens (token stride n_blocks): even blocks into
// one set of accumulators, odd blocks into another, min terms into a third.
// y[t * ldy].
template <class W, int T>
void tile(const typename W::Block* wb, int64_t n_blocks, const typename W::Act* x, float* y, int64_t ldy) {
  __m256 even[T], odd[T], mins[T];
#pragma GCC unroll 4  // keeps the T accumulators in registers
  for (int t = 0; t < T; ++t) even[t] = odd[t] = mins[t] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < n_blocks; b += 2) {
    // Past the row's end this touches the next row or memory after the
    // matrix: a prefetch never faults.
    const char* p = reinterpret_cast<const char*>(wb + b) + kPrefetchBytes;
    for (size_t i = 0; i < 2 * sizeof(typename W::Block); i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
    W::template step<T>(wb[b], x + b, n_blocks, even, mins);
    W::template step<T>(wb[b + 1], x + b + 1, n_blocks, odd, mins);
  }
  if (b < n_blocks) W::template step<T>(wb[b], x + b, n_blocks, even, mins);
#pragma GCC unroll 4  // keeps the T accumulators in registers
  for (int t = 0; t < T; ++t) y[t * ldy] = hsum(_mm256_add_ps(_mm256_add_ps(even[t], odd[t]), mins[t]));
}

template <class W>
void rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* xv, int64_t n_tokens,
          float* y, int64_t ldy) {
  constexpr int64_t kValues = sizeof(W::Act::qs);
  const int64_t n_blocks = n_cols / kValues;
  const auto* x = static_cast<const typename W::Act*>(xv);
  for (int64_t r = r0; r < r1; ++r) {
    const auto* wb = reinterpret_cast<const typename W::Block*>(w + r * row_bytes);
    int64_t t = 0;
    for (; t + kTokens <= n_tokens; t += kTokens)
      tile<W, kTokens>(wb, n_blocks, x + t * n_blocks, y + t * ldy + r, ldy);
    for (; t < n_tokens; ++t) tile<W, 1>(wb, n_blocks, x + t * n_blocks, y + t * ldy + r, ldy);
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_q4_1_avx2) {
  rows<Q4_1>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_q5_0_avx2) {
  rows<Q5_0>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_q5_1_avx2) {
  rows<Q5_1>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_iq4_nl_avx2) {
  rows<Iq4Nl>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_iq4_xs_avx2) {
  rows<Iq4Xs>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}

}  // namespace nexus
