// Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS decode kernels with 512-bit VNNI
// (gemm_legacy.h). Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -mavx512vnni (src/CMakeLists.txt); no VBMI.
//
// The lane layout of gemm_quant_avx512.cpp: a step covers a quad of four
// 32-value blocks (IQ4_XS: four sub-blocks of a super-block, two quads per
// super-block) of one weight row in two registers, A = values 0..15 of the
// four blocks and B = values 16..31, so int32 lanes 4k .. 4k + 3 belong to
// block k; the activations come repacked into that order (QuadAct,
// legacy_act_avx512.h). vpdpbusd takes the weights unsigned: Q4_1 / Q5_1 as
// they are (plus m_w * s per block, s = d_x * qsum), Q5_0 as q + 16 and the
// IQ4 levels + 128, the shifts removed by the lanes' start values, so every
// lane holds its exact signed partial sum.
//
// Weight decoding per quad: nibbles by AND / shift+AND of four 16-byte loads
// (IQ4_XS: one 64-byte load); fifth bits (Q5_x) from each block's qh through
// vpermw + vpshufb + vptestmb into byte masks, added as 16 under the masks;
// IQ4 levels by vpshufb of the 16-entry table (kIq4nlValues + 128); fp16
// scales gathered by vpermw and widened by vcvtph2ps. IQ4_XS multiplies the
// lanes by (scale - 32) in int32 (vpmulld), sums its two quads exactly
// (|lane| <= 8 * 127 * 127 * 32 * 2 < 2^24, so the conversion is exact) and
// scales once by d_w * d_x.
//
// Measured (scratch loop over these functions, 1 thread, CPU time, 1 token,
// 4096 x 4096 weight; the 2-core AMD EPYC VM, shared, load 2-6, so ranges of
// 3-5 runs): from L3 Q4_1 14-18, Q5_0 14-18, Q5_1 13-17, IQ4_NL 17-22,
// IQ4_XS 16-20 GB/s, as the Q4_0 kernel of gemm_quant_avx512.cpp (14-23) in
// the same runs; streamed from DRAM (8 weights cycled, 70-100 MB) 11-13 GB/s
// each, a plain 512-bit read loop 13-20. 4 tokens: 5-7 GB/s of weight. The
// prefetch distances were not re-tuned for these types.
//
// Determinism: each (row, token) has its own accumulators (even units into
// one, odd into the other; a unit is a quad, or an IQ4_XS super-block) and
// sees the same operations in the same order in a 4-token or a 1-token tile,
// in any token chunk and any row range.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/gemm_legacy.h"
#include "kernels/x86/legacy_act_avx512.h"

namespace nexus {
namespace {

constexpr int kTokens = 4;      // tokens per tile
constexpr int64_t kChunk = 64;  // tokens repacked at a time

// Prefetch distances (bytes ahead of the loads, into L1 / L2): those
// gemm_quant_avx512.cpp measured for Q4_0 / Q8_0, whose weight streams are
// alike (18-34 bytes per 32 values).
struct PrefetchDistances {
  size_t l1, l2;
};
const PrefetchDistances& prefetch_distances() {
  static const PrefetchDistances d =
      cpu_features().amd ? PrefetchDistances{2048, 12288} : PrefetchDistances{2048, 6144};
  return d;
}

inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
// Four 16-byte nibble fields -> values 0..15 of the four blocks (A) and 16..31 (B).
inline void nibbles4(const uint8_t* p0, const uint8_t* p1, const uint8_t* p2, const uint8_t* p3, __m512i& lo,
                     __m512i& hi) {
  const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load16(p0)), load16(p1), 1);
  const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load16(p2)), load16(p3), 1);
  const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  lo = _mm512_and_si512(q, low4);
  hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
}

// The first 8 bytes of four blocks, 64 bits each (scales and qh). Loaded
// as vmovq / vmovhps pairs: building the vector from four scalars went
// through the stack (four 8-byte stores, one 32-byte load: a failed store
// forward) and halved Q5_1's rate.
inline __m128i load8x2(const uint8_t* p0, const uint8_t* p1) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0));
  return _mm_castps_si128(_mm_loadh_pi(_mm_castsi128_ps(lo), reinterpret_cast<const __m64*>(p1)));
}
inline __m512i heads4(const uint8_t* p, size_t block_bytes) {
  const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(load8x2(p, p + block_bytes)),
                                            load8x2(p + 2 * block_bytes, p + 3 * block_bytes), 1);
  return _mm512_zextsi256_si512(h);
}

// vpermw indices (constants of each type).
struct Words {
  int16_t v[32];
};
// Word i <- word w[i / 4]: 16-bit scales w[0..3] spread to the four lanes of
// their blocks (low 256 bits), w[4..7] likewise (high 256 bits).
constexpr Words scale_words(std::array<int, 8> w) {
  Words r{};
  for (int i = 0; i < 32; ++i) r.v[i] = static_cast<int16_t>(w[i / 4]);
  return r;
}
// 128-bit lane k <- words w0 + 4k, w0 + 4k + 1 (block k's qh) in its bytes 0..3.
constexpr Words qh_words(int w0) {
  Words r{};
  for (int k = 0; k < 4; ++k) {
    r.v[8 * k] = static_cast<int16_t>(w0 + 4 * k);
    r.v[8 * k + 1] = static_cast<int16_t>(w0 + 4 * k + 1);
  }
  return r;
}
inline __m512i permute_words(const Words& idx, __m512i v) {
  return _mm512_permutexvar_epi16(_mm512_loadu_si512(idx.v), v);
}

// Fifth bits: heads from heads4(), qh_idx = qh_words() of the type's qh
// position. Adds 16 to the A / B bytes whose bit is set.
inline void add_fifth_bits(__m512i heads, const Words& qh_idx, __m512i& lo, __m512i& hi) {
  const __m512i qh = permute_words(qh_idx, heads);
  // Byte j of lane k <- qh byte j / 8 (A) or 2 + j / 8 (B); then test bit j % 8.
  const __m512i to_a = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m512i to_b = _mm512_broadcast_i32x4(_mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m512i bit = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ull));
  const __m512i sixteen = _mm512_set1_epi8(16);
  lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, to_a), bit), lo, sixteen);
  hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, to_b), bit), hi, sixteen);
}

// The low (A) and high (B) 16 fp16 words of a vpermw result as floats.
inline __m512 low_halves(__m512i v) { return _mm512_cvtph_ps(_mm512_castsi512_si256(v)); }
inline __m512 high_halves(__m512i v) { return _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1)); }

// One quad's integer dot products of one token: lanes 4k..4k+3 = block k.
inline __m512i quad_dot(__m512i start, __m512i wa, __m512i wb, const QuadAct& x) {
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, wa, _mm512_load_si512(x.a)), wb, _mm512_load_si512(x.b));
}

// The per-token step of the types with a minimum (Q4_1, Q5_1): the scaled
// integer sum plus m times the activation block's d * sum (QuadAct::extra).
template <int T>
inline void tokens_with_min(__m512i wa, __m512i wb, __m512 dw, __m512 mw, const QuadAct* a, int64_t stride,
                            __m512* acc) {
#pragma GCC unroll 4  // keeps the T accumulators in registers
  for (int t = 0; t < T; ++t) {
    const QuadAct& x = a[t * stride];
    const __m512i s = quad_dot(_mm512_setzero_si512(), wa, wb, x);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_load_ps(x.dx)), acc[t]);
    acc[t] = _mm512_fmadd_ps(mw, _mm512_load_ps(reinterpret_cast<const float*>(x.extra)), acc[t]);
  }
}

// Per type: its unit (a quad of blocks, or a super-block) and one step: one
// unit of one weight row against T tokens' QuadActs (stride apart) into acc.
struct Q4_1 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_1), kUnitBytes = 4 * kBlockBytes;
  static constexpr int kShiftLog2 = -1;  // min type
  template <int T>
  static void step(const uint8_t* p, const QuadAct* a, int64_t stride, __m512* acc) {
    __m512i wa, wb;
    nibbles4(p + 4, p + 24, p + 44, p + 64, wa, wb);
    // d at words 0, 10, 20, 30 and m at 1, 11, 21, 31: all in the first 64 bytes.
    static constexpr Words kDm = scale_words({0, 10, 20, 30, 1, 11, 21, 31});
    const __m512i dm = permute_words(kDm, _mm512_loadu_si512(p));
    const __m512 dw = low_halves(dm), mw = high_halves(dm);
    tokens_with_min<T>(wa, wb, dw, mw, a, stride, acc);
  }
};

struct Q5_1 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_1), kUnitBytes = 4 * kBlockBytes;
  static constexpr int kShiftLog2 = -1;
  template <int T>
  static void step(const uint8_t* p, const QuadAct* a, int64_t stride, __m512* acc) {
    __m512i wa, wb;
    nibbles4(p + 8, p + 32, p + 56, p + 80, wa, wb);
    const __m512i heads = heads4(p, kBlockBytes);  // head k: d, m, qh (words 4k, 4k + 1, 4k + 2..3)
    static constexpr Words kQh = qh_words(2), kDm = scale_words({0, 4, 8, 12, 1, 5, 9, 13});
    add_fifth_bits(heads, kQh, wa, wb);
    const __m512i dm = permute_words(kDm, heads);
    const __m512 dw = low_halves(dm), mw = high_halves(dm);
    tokens_with_min<T>(wa, wb, dw, mw, a, stride, acc);
  }
};

struct Q5_0 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_0), kUnitBytes = 4 * kBlockBytes;
  static constexpr int kShiftLog2 = 4;  // q + 16
  template <int T>
  static void step(const uint8_t* p, const QuadAct* a, int64_t stride, __m512* acc) {
    __m512i wa, wb;
    nibbles4(p + 6, p + 28, p + 50, p + 72, wa, wb);
    const __m512i heads = heads4(p, kBlockBytes);  // head k: d, qh (words 4k, 4k + 1..2)
    static constexpr Words kQh = qh_words(1), kD = scale_words({0, 4, 8, 12, 0, 0, 0, 0});
    add_fifth_bits(heads, kQh, wa, wb);
    const __m512 dw = low_halves(permute_words(kD, heads));
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t) {
      const QuadAct& x = a[t * stride];
      const __m512i s = quad_dot(_mm512_load_si512(x.extra), wa, wb, x);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_load_ps(x.dx)), acc[t]);
    }
  }
};

// kIq4nlValues + 128 as u8 in every 128-bit lane.
inline __m512i iq4_table() {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm512_broadcast_i32x4(_mm_xor_si128(v, _mm_set1_epi8(static_cast<char>(0x80))));
}

struct Iq4Nl {
  static constexpr size_t kBlockBytes = sizeof(BlockIq4Nl), kUnitBytes = 4 * kBlockBytes;
  static constexpr int kShiftLog2 = 7;  // level + 128
  template <int T>
  static void step(const uint8_t* p, const QuadAct* a, int64_t stride, __m512* acc) {
    __m512i lo, hi;
    nibbles4(p + 2, p + 20, p + 38, p + 56, lo, hi);
    const __m512i table = iq4_table();
    const __m512i wa = _mm512_shuffle_epi8(table, lo), wb = _mm512_shuffle_epi8(table, hi);
    // d at words 0, 9, 18, 27 of the quad's first 64 bytes.
    static constexpr Words kD = scale_words({0, 9, 18, 27, 0, 0, 0, 0});
    const __m512 dw = low_halves(permute_words(kD, _mm512_loadu_si512(p)));
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t) {
      const QuadAct& x = a[t * stride];
      const __m512i s = quad_dot(_mm512_load_si512(x.extra), wa, wb, x);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_load_ps(x.dx)), acc[t]);
    }
  }
};

struct Iq4Xs {
  static constexpr size_t kUnitBytes = sizeof(BlockIq4Xs);
  template <int T>
  static void step(const uint8_t* p, const QuadAct* a, int64_t stride, __m512* acc) {
    const auto& blk = *reinterpret_cast<const BlockIq4Xs*>(p);
    uint32_t lo_bits;
    std::memcpy(&lo_bits, blk.scales_l, 4);
    const __m512i sl = _mm512_set1_epi32(static_cast<int>(lo_bits));
    const __m512i sh = _mm512_set1_epi32(static_cast<int>(blk.scales_h) << 4);
    const __m512i table = iq4_table();
    __m512i isum[T];
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      // Sub-block j = 4h + k in lanes 4k..4k+3: low 4 bits at 4j of scales_l, high 2 at 2j of scales_h.
      const __m512i lshift = _mm512_add_epi32(_mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
                                              _mm512_set1_epi32(16 * h));
      const __m512i scale = _mm512_sub_epi32(
          _mm512_or_si512(
              _mm512_and_si512(_mm512_srlv_epi32(sl, lshift), _mm512_set1_epi32(0x0f)),
              _mm512_and_si512(_mm512_srlv_epi32(sh, _mm512_srli_epi32(lshift, 1)), _mm512_set1_epi32(0x30))),
          _mm512_set1_epi32(32));
      const __m512i q = _mm512_loadu_si512(blk.qs + 64 * h);
      const __m512i low4 = _mm512_set1_epi8(0x0f);
      const __m512i wa = _mm512_shuffle_epi8(table, _mm512_and_si512(q, low4));
      const __m512i wb = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), low4));
#pragma GCC unroll 4  // keeps the T accumulators in registers
      for (int t = 0; t < T; ++t) {
        const QuadAct& x = a[t * stride + h];
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(quad_dot(_mm512_load_si512(x.extra), wa, wb, x), scale));
      }
    }
    const __m512 dw = _mm512_set1_ps(_cvtsh_ss(blk.d));
#pragma GCC unroll 4  // keeps the T accumulators in registers
    for (int t = 0; t < T; ++t)
      acc[t] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, _mm512_load_ps(a[t * stride].dx)), acc[t]);
  }
};

// One weight row against T tokens from `a` (token stride `stride` QuadActs,
// `acts` of them per unit); n_units units, the last n_units - n_full of them
// (blocks of 32 only: 1..3 blocks) read from a zero-padded copy. y[t * ldy].
template <class W, int T>
void tile(const uint8_t* row, int64_t n_units, int64_t n_full, size_t tail_bytes, const QuadAct* a, int64_t acts,
          int64_t stride, float* y, int64_t ldy) {
  const size_t pf_l1 = prefetch_distances().l1, pf_l2 = prefetch_distances().l2;
  __m512 even[T], odd[T];
#pragma GCC unroll 4  // keeps the T accumulators in registers
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  int64_t u = 0;
  for (; u + 1 < n_full; u += 2) {
    const uint8_t* p = row + u * W::kUnitBytes;
    // Past the row's end this touches the next row or memory after the
    // matrix: a prefetch never faults.
    const char* here = reinterpret_cast<const char*>(p);
    for (size_t i = 0; i < 2 * W::kUnitBytes; i += 64) {
      _mm_prefetch(here + pf_l2 + i, _MM_HINT_T1);
      _mm_prefetch(here + pf_l1 + i, _MM_HINT_T0);
    }
    W::template step<T>(p, a + u * acts, stride, even);
    W::template step<T>(p + W::kUnitBytes, a + (u + 1) * acts, stride, odd);
  }
  for (; u < n_units; ++u) {
    __m512* acc = u % 2 == 0 ? even : odd;
    if (u < n_full) {
      W::template step<T>(row + u * W::kUnitBytes, a + u * acts, stride, acc);
    } else {
      // Zero blocks: scale 0, values 0 (their products vanish).
      alignas(64) uint8_t pad[W::kUnitBytes + 64] = {};
      std::memcpy(pad, row + u * W::kUnitBytes, tail_bytes);
      W::template step<T>(pad, a + u * acts, stride, acc);
    }
  }
#pragma GCC unroll 4  // keeps the T accumulators in registers
  for (int t = 0; t < T; ++t) y[t * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(even[t], odd[t]));
}

// Rows [r0, r1) against tokens [0, n_tokens), kChunk tokens repacked at a time.
// Act: BlockQ8Act (units: quads of blocks) or BlockQ8K (units: super-blocks).
template <class W, class Act>
void rows512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* xv,
             int64_t n_tokens, float* y, int64_t ldy) {
  constexpr bool kQ8K = sizeof(Act) == sizeof(BlockQ8K);
  const auto* x = static_cast<const Act*>(xv);
  const int64_t n_act = n_cols / static_cast<int64_t>(sizeof(Act::qs));  // activation blocks per token
  const int64_t n_units = kQ8K ? n_act : (n_act + 3) / 4, n_full = kQ8K ? n_act : n_act / 4;
  const int64_t acts = kQ8K ? 2 : 1, stride = n_units * acts;
  size_t tail_bytes = 0;
  if constexpr (!kQ8K) tail_bytes = static_cast<size_t>(n_act % 4) * W::kBlockBytes;
  thread_local std::vector<QuadAct> buf;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kChunk) {
    const int64_t nt = std::min(kChunk, n_tokens - t0);
    if (buf.size() < static_cast<size_t>(nt * stride)) buf.resize(static_cast<size_t>(nt * stride));
    for (int64_t t = 0; t < nt; ++t) {
      if constexpr (kQ8K)
        repack_q8k(x + (t0 + t) * n_act, n_act, buf.data() + t * stride);
      else
        repack_q8(x + (t0 + t) * n_act, n_act, W::kShiftLog2, buf.data() + t * stride);
    }
    const QuadAct* a = buf.data();
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float* yr = y + t0 * ldy + r;
      int64_t t = 0;
      for (; t + kTokens <= nt; t += kTokens)
        tile<W, kTokens>(row, n_units, n_full, tail_bytes, a + t * stride, acts, stride, yr + t * ldy, ldy);
      for (; t < nt; ++t) tile<W, 1>(row, n_units, n_full, tail_bytes, a + t * stride, acts, stride, yr + t * ldy, ldy);
    }
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_q4_1_avx512) {
  rows512<Q4_1, BlockQ8Act>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_q5_0_avx512) {
  rows512<Q5_0, BlockQ8Act>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_q5_1_avx512) {
  rows512<Q5_1, BlockQ8Act>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_iq4_nl_avx512) {
  rows512<Iq4Nl, BlockQ8Act>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}
NEXUS_GEMM_KERNEL(gemm_iq4_xs_avx512) {
  rows512<Iq4Xs, BlockQ8K>(w, row_bytes, r0, r1, n_cols, x, n_tokens, y, ldy);
}

}  // namespace nexus
