// K-quant weights (Q2_K .. Q6_K) against Q8_K activations with 512-bit VNNI,
// for decode (gemm_kquants_avx512.h). Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mavx512vnni (src/CMakeLists.txt).
//
// A super-block (256 values) of one weight row becomes four 64-byte vectors
// W0..W3 of unsigned levels (Q2_K 0..3, Q3_K 0..7 = q + 4, Q4_K 0..15, Q5_K
// 0..31, Q6_K 0..63 = q + 32), each in the order its bytes come out of the
// packed block with the fewest instructions; the activations are repacked
// once per call (SbAct) into the same byte order. Each int32 lane of
// vpdpbusd(0, Wk, Xk) is the dot of four values of one sub-block. The lane's
// sub-block scale sits in a dword (scale, 0) of Sk (built per super-block by
// one vpshufb from the unpacked scales), so vpdpwssd(isum, dot, Sk) adds
// dot * scale: the dot fits in int16 (at most 4 * 63 * 127 = 32004), and the
// zero high half of Sk drops the dot's sign-extension word. Q4_K and Q5_K
// lay W0, W1 (and W2, W3) out so that their lanes share sub-blocks and add
// two vpdpbusd before one vpdpwssd (8 values per lane, at most 31496). Then
// per (super-block, token):
//   Q3_K, Q6_K:        isum += sum over sub-blocks of (-bias * scale) * bsums
//                      (one more vpdpwssd), acc += float(isum) * (d * x.d);
//   Q2_K, Q4_K, Q5_K:  acc += float(isum) * (d * x.d)
//                           - float(sum of min * bsums) * (dmin * x.d),
// acc holding 16 float lanes per (row, token), reduced once at the row's end.
// All integer sums are exact, so only float32 rounding separates this from
// the reference (gemm_ref_kquants.cpp).
//
// Determinism: each (row, token) has its own accumulator and sees the same
// operations in the same order whether it is computed in a tile of 1, 2, 3
// or 4 tokens, in any token chunk, or any row range.
//
// Measured on the shared 2-core AMD EPYC VM this was written on (3.5 GHz;
// zmm vpdpbusd, vpdpwssd, vpshufb, vcvtdq2ps and FMA each 1 per cycle, simple
// integer ops 2), one thread, thread CPU time, a weight held in L2 (64 x
// 11008): 1 token Q2_K 5.4, Q3_K 7.1, Q4_K 7.0, Q5_K 7.4, Q6_K 7.9 ns per
// super-block (15, 15, 20, 24, 27 GB/s of weight); 4 tokens 15-19 ns per
// super-block, bound by the per-token vpdpbusd / vpdpwssd / float work
// (13 such ops per super-block and token for Q4_K). The reference kernels
// take 290 ns (Q4_K, 1 token). From DRAM (4096 x 11008, 1 token, 2 threads)
// the kernels ran at the machine's read rate of the moment (10-20 GB/s
// under the other tenants' load).
//
// Tried and not kept: folding each token's 16 integer lanes to 4 before the
// float work, four tokens' folds in one zmm (one convert / multiply / FMA
// and, for the mins, one vpdpwssd per four tokens; a one-token path on xmm
// with the same lanes). Best of 3 alternating runs, ns per super-block at 4 /
// 8 tokens: Q2_K 15.0 -> 14.2 / 30.2 -> 28.6, Q4_K 13.9 -> 13.2 / 28.5 ->
// 26.9, Q5_K 15.7 -> 14.1 / 32.1 -> 29.0, but Q3_K 14.7 -> 15.7, Q6_K 14.2 ->
// 15.2, and 1 token 1-15% slower for every type: too mixed for the code.
#include "kernels/x86/gemm_kquants_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

#define NEXUS_ALWAYS_INLINE inline __attribute__((always_inline))

// One super-block of one token, in the weight type's byte order.
struct alignas(64) SbAct {
  int8_t x[4][64];    // Xk: bytes 16 g .. 16 g + 15 = values 16 kGroups[k][g] ..
  int16_t bsums[16];  // Q4_K / Q5_K: sums per 32 values in 0..7, zeros after; else sums per 16
  float dx;
  uint8_t pad[28];
};
static_assert(sizeof(SbAct) == 320);

// One super-block of one weight row, decoded.
struct Sb {
  __m512i w[4];  // unsigned levels, the order of SbAct::x
  __m512i s[4];  // dword lane l of Sk: (scale of its sub-block as int16, 0)
  __m512i m;     // int16 lane i: min (or -bias * scale) of bsums[i]; where bsums is zero, anything
  __m512 d, dmin;
};

// Which 16 values each 128-bit lane g of Wk holds: values 16 groups[k][g] ..
// + 15, so dword lane l holds 16 groups[k][l / 4] + 4 (l % 4) .. + 3.
using Groups = int[4][4];
// Q4_K / Q5_K: the low nibbles of 16-byte chunks 0, 2, 4, 6 of qs (values 0, 64,
// 128, 192 ..), of chunks 1, 3, 5, 7 (16, 80, ..), then the high nibbles (+ 32).
// W0 and W1 (and W2, W3) then put the same sub-block of 32 in each lane.
constexpr Groups kGroupsQ45 = {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}};
// Q2_K / Q3_K: 2-bit field j of the 64 bytes of qs.
constexpr Groups kGroupsQ23 = {{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}};
// Q6_K: the values in order.
constexpr Groups kGroupsQ6 = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};

// vpshufb controls that build Sk from the unpacked scales.
enum class ScaleSrc {
  Byte32,  // bytes 0..7 = scale per 32 values (Q4_K, Q5_K)
  Byte16,  // bytes 0..15 = scale per 16 values (Q2_K)
  Word16,  // int16 scales per 16 values, those of sub-blocks 8 (h) .. 8 h + 7 in a 128-bit lane (Q3_K, Q6_K)
};
struct alignas(64) ScaleCtrl {
  int8_t b[4][64];
};
constexpr ScaleCtrl make_ctrl(const Groups& groups, ScaleSrc src) {
  ScaleCtrl c{};
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 16; ++l) {
      const int g = groups[k][l / 4];  // sub-block of 16
      int8_t* d = c.b[k] + 4 * l;
      d[0] = d[1] = d[2] = d[3] = -128;  // high bit set: vpshufb writes zero
      if (src == ScaleSrc::Byte32) {
        d[0] = static_cast<int8_t>(g / 2);
      } else if (src == ScaleSrc::Byte16) {
        d[0] = static_cast<int8_t>(g);
      } else {
        d[0] = static_cast<int8_t>(2 * (g % 8));
        d[1] = static_cast<int8_t>(2 * (g % 8) + 1);
      }
    }
  return c;
}
constexpr ScaleCtrl kCtrlQ45 = make_ctrl(kGroupsQ45, ScaleSrc::Byte32);  // S0 (for W0, W1), S2 (W2, W3)
constexpr ScaleCtrl kCtrlQ2 = make_ctrl(kGroupsQ23, ScaleSrc::Byte16);
constexpr ScaleCtrl kCtrlQ3 = make_ctrl(kGroupsQ23, ScaleSrc::Word16);
constexpr ScaleCtrl kCtrlQ6 = make_ctrl(kGroupsQ6, ScaleSrc::Word16);

// Per-byte constants of the two 32-byte halves of a vector.
NEXUS_ALWAYS_INLINE __m512i halves8(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(lo))),
                            _mm256_set1_epi8(static_cast<char>(hi)), 1);
}
NEXUS_ALWAYS_INLINE __m512i halves64(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi64x(lo)), _mm256_set1_epi64x(hi), 1);
}

NEXUS_ALWAYS_INLINE __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }
// 32 bytes into both halves.
NEXUS_ALWAYS_INLINE __m512i bcast256(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
NEXUS_ALWAYS_INLINE __m512 half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _mm512_set1_ps(_cvtsh_ss(h));
}

// Sk (k = 0, step, ..) from unsigned byte scales (ScaleSrc::Byte32 / Byte16) in the xmm `bytes`.
template <int kStep>
NEXUS_ALWAYS_INLINE void byte_scales(__m128i bytes, const ScaleCtrl& c, __m512i* s) {
  const __m512i b = _mm512_broadcast_i32x4(bytes);
#pragma GCC unroll 4
  for (int k = 0; k < 4; k += kStep) s[k] = _mm512_shuffle_epi8(b, _mm512_load_si512(c.b[k]));
}

// Q4_K / Q5_K packed scales (12 bytes at p; 16 are read, inside the block)
// -> bytes 0..7 = scales, 8..15 = mins (unpack_q4k_scales in kquant_unpack.h).
// As dwords A, B, C of bytes 0..3, 4..7, 8..11: scales 0..3 = A & 63, mins 0..3
// = B & 63, scales 4..7 = (C & 15) | top 2 bits of A's bytes << 4, mins 4..7 =
// (C >> 4 & 15) | top 2 bits of B's bytes << 4.
NEXUS_ALWAYS_INLINE __m128i q4k_scales(const uint8_t* p) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i ab = _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 1, 0, 0));  // A A B B (lanes 0..3)
  const __m128i cc = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 2, 2));
  const __m128i low6 = _mm_and_si128(ab, _mm_setr_epi32(0x3f3f3f3f, 0, 0x3f3f3f3f, 0));
  const __m128i top2 = _mm_and_si128(_mm_srli_epi32(ab, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  const __m128i c4 = _mm_and_si128(_mm_srlv_epi32(cc, _mm_setr_epi32(0, 0, 0, 4)), _mm_setr_epi32(0, 0x0f0f0f0f, 0, 0x0f0f0f0f));
  // scales 0..3, 4..7 in dwords 0, 1; mins 0..3, 4..7 in dwords 2, 3
  return _mm_ternarylogic_epi32(low6, top2, c4, 0xfe);  // a | b | c
}

// Q4_K / Q5_K: W0, W1 share their lanes' sub-blocks (as do W2, W3), so one
// vpdpwssd scales the sum of two vpdpbusd (at most 8 * 31 * 127 = 31496 per
// lane, still an int16): S1 and S3 are unused.
struct Q4K {
  static constexpr size_t kBytes = sizeof(BlockQ4_K);
  static constexpr const Groups& kGroups = kGroupsQ45;
  static constexpr bool kHasMin = true, kPairBsums = true, kPairDots = true;
  static NEXUS_ALWAYS_INLINE void nibbles(const uint8_t* qs, Sb& o) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i q0 = load512(qs), q1 = load512(qs + 64);
    const __m512i even = _mm512_shuffle_i64x2(q0, q1, _MM_SHUFFLE(2, 0, 2, 0));  // 16-byte chunks 0, 2, 4, 6
    const __m512i odd = _mm512_shuffle_i64x2(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));
    o.w[0] = _mm512_and_si512(even, low4);
    o.w[1] = _mm512_and_si512(odd, low4);
    o.w[2] = _mm512_and_si512(_mm512_srli_epi16(even, 4), low4);
    o.w[3] = _mm512_and_si512(_mm512_srli_epi16(odd, 4), low4);
  }
  static NEXUS_ALWAYS_INLINE void scales(const uint8_t* p, Sb& o) {
    const __m128i sm = q4k_scales(p + 4);
    byte_scales<2>(sm, kCtrlQ45, o.s);
    o.m = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
    o.d = half_at(p);
    o.dmin = half_at(p + 2);
  }
  static NEXUS_ALWAYS_INLINE void decode(const uint8_t* p, Sb& o) {
    nibbles(p + offsetof(BlockQ4_K, qs), o);
    scales(p, o);
  }
};

struct Q5K {
  static constexpr size_t kBytes = sizeof(BlockQ5_K);
  static constexpr const Groups& kGroups = kGroupsQ45;
  static constexpr bool kHasMin = true, kPairBsums = true, kPairDots = true;
  static NEXUS_ALWAYS_INLINE void decode(const uint8_t* p, Sb& o) {
    static_assert(offsetof(BlockQ5_K, scales) == offsetof(BlockQ4_K, scales));
    Q4K::nibbles(p + offsetof(BlockQ5_K, qs), o);
    // The fifth bit of value v is bit v / 32 of qh[v % 32]. Lane g of W0 holds
    // values 64 g + i (i < 16): bit 2g of qh[i]; W1 64 g + 16 + i: bit 2g of
    // qh[16 + i]; W2, W3 the next bit of the same bytes.
    const __m512i qh_lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ5_K, qh))));
    const __m512i qh_hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ5_K, qh) + 16)));
    const __m512i bit_even = _mm512_set_epi32(0x40404040, 0x40404040, 0x40404040, 0x40404040, 0x10101010, 0x10101010,
                                              0x10101010, 0x10101010, 0x04040404, 0x04040404, 0x04040404, 0x04040404,
                                              0x01010101, 0x01010101, 0x01010101, 0x01010101);
    const __m512i bit_odd = _mm512_add_epi8(bit_even, bit_even);
    const __m512i sixteen = _mm512_set1_epi8(16);
    o.w[0] = _mm512_mask_add_epi8(o.w[0], _mm512_test_epi8_mask(qh_lo, bit_even), o.w[0], sixteen);
    o.w[1] = _mm512_mask_add_epi8(o.w[1], _mm512_test_epi8_mask(qh_hi, bit_even), o.w[1], sixteen);
    o.w[2] = _mm512_mask_add_epi8(o.w[2], _mm512_test_epi8_mask(qh_lo, bit_odd), o.w[2], sixteen);
    o.w[3] = _mm512_mask_add_epi8(o.w[3], _mm512_test_epi8_mask(qh_hi, bit_odd), o.w[3], sixteen);
    Q4K::scales(p, o);
  }
};

// Q6_K half h (values 128 h ..): ql[64 h .. 64 h + 63] holds values 128 h + l
// (low nibble of byte l < 32), + 32 (low, byte 32 + l), + 64 (high, byte l),
// + 96 (high, byte 32 + l); the top 2 bits are bits 2k, 2k + 1 of qh[32 h + l]
// for those four k = 0..3. So the low nibbles are values 128 h .. + 63 and
// the high ones + 64 .. + 127, in order: W0..W3 are the values in order.
struct Q6K {
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  static constexpr const Groups& kGroups = kGroupsQ6;
  static constexpr bool kHasMin = false, kPairBsums = false, kPairDots = false;
  static NEXUS_ALWAYS_INLINE void decode(const uint8_t* p, Sb& o) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(p + offsetof(BlockQ6_K, ql) + 64 * h);
      const __m512i qh = bcast256(p + offsetof(BlockQ6_K, qh) + 32 * h);
      // The wanted 2 bits of qh to bits 4..5 of the same byte: masked first,
      // so the 64-bit shifts carry nothing into a neighbouring byte.
      const __m512i hlo = _mm512_sllv_epi64(_mm512_and_si512(qh, halves8(0x03, 0x0c)), halves64(4, 2));
      const __m512i hhi = _mm512_srlv_epi64(_mm512_and_si512(qh, halves8(0x30, 0xc0)), halves64(0, 2));
      o.w[2 * h] = _mm512_ternarylogic_epi32(ql, hlo, low4, 0xec);  // (a & c) | b
      o.w[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), hhi, low4, 0xec);
    }
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ6_K, scales))));
    const __m512i lo = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sc));
    const __m512i hi = _mm512_broadcast_i32x4(_mm256_extracti128_si256(sc, 1));
    o.s[0] = _mm512_shuffle_epi8(lo, _mm512_load_si512(kCtrlQ6.b[0]));
    o.s[1] = _mm512_shuffle_epi8(lo, _mm512_load_si512(kCtrlQ6.b[1]));
    o.s[2] = _mm512_shuffle_epi8(hi, _mm512_load_si512(kCtrlQ6.b[2]));
    o.s[3] = _mm512_shuffle_epi8(hi, _mm512_load_si512(kCtrlQ6.b[3]));
    o.m = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc, _mm256_set1_epi16(-32)));
    o.d = half_at(p + offsetof(BlockQ6_K, d));
  }
};

// Q2_K / Q3_K: 2-bit field j of qs[l] (l < 32) is value 32 j + l, of qs[32 + l]
// value 128 + 32 j + l. Wj = field j of the 64 bytes.
NEXUS_ALWAYS_INLINE void two_bit_fields(const uint8_t* qs, Sb& o) {
  const __m512i q = load512(qs), three = _mm512_set1_epi8(3);
  o.w[0] = _mm512_and_si512(q, three);
  o.w[1] = _mm512_and_si512(_mm512_srli_epi16(q, 2), three);
  o.w[2] = _mm512_and_si512(_mm512_srli_epi16(q, 4), three);
  o.w[3] = _mm512_and_si512(_mm512_srli_epi16(q, 6), three);
}

struct Q2K {
  static constexpr size_t kBytes = sizeof(BlockQ2_K);
  static constexpr const Groups& kGroups = kGroupsQ23;
  static constexpr bool kHasMin = true, kPairBsums = false, kPairDots = false;
  static NEXUS_ALWAYS_INLINE void decode(const uint8_t* p, Sb& o) {
    two_bit_fields(p + offsetof(BlockQ2_K, qs), o);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ2_K, scales)));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    byte_scales<1>(_mm_and_si128(raw, low4), kCtrlQ2, o.s);
    o.m = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), low4)));
    o.d = half_at(p + offsetof(BlockQ2_K, d));
    o.dmin = half_at(p + offsetof(BlockQ2_K, dmin));
  }
};

// Q3_K's 16 six-bit scales (12 bytes at p) minus 32, as int8 (unpack_q3k_scales
// in kquant_unpack.h). Dwords A, B, C of bytes 0..3, 4..7, 8..11: low nibbles
// of scales 0..3, 4..7, 8..11, 12..15 = A, B, A >> 4, B >> 4 (& 0x0f each byte);
// their top 2 bits = C >> 0, 2, 4, 6 (& 3 each byte).
NEXUS_ALWAYS_INLINE __m128i q3k_scales(const uint8_t* p) {
  const __m128i x = _mm_maskz_loadu_epi8(0x0fff, p);  // the block's last bytes: read no further
  const __m128i abab = _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 1, 0));
  const __m128i cccc = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 2, 2));
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(abab, _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi8(0x0f));
  const __m128i top = _mm_and_si128(_mm_srlv_epi32(cccc, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi32(top, 4)), _mm_set1_epi8(32));
}

struct Q3K {
  static constexpr size_t kBytes = sizeof(BlockQ3_K);
  static constexpr const Groups& kGroups = kGroupsQ23;
  static constexpr bool kHasMin = false, kPairBsums = false, kPairDots = false;
  static NEXUS_ALWAYS_INLINE void decode(const uint8_t* p, Sb& o) {
    two_bit_fields(p + offsetof(BlockQ3_K, qs), o);
    // The high bit of value 32 j + l is bit j of hmask[l], of 128 + 32 j + l bit 4 + j; set means + 4.
    const __m512i hm = bcast256(p + offsetof(BlockQ3_K, hmask));
    const __m512i four = _mm512_set1_epi8(4);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __mmask64 hi = _mm512_test_epi8_mask(hm, halves8(1 << j, 1 << (4 + j)));
      o.w[j] = _mm512_mask_add_epi8(o.w[j], hi, o.w[j], four);
    }
    const __m256i sc = _mm256_cvtepi8_epi16(q3k_scales(p + offsetof(BlockQ3_K, scales)));
    // Sub-blocks 2j, 2j + 1 (int16 scales 0..7) in 128-bit lanes 0, 1 of Wj, 8 + 2j, 9 + 2j in lanes 2, 3.
    const __m512i s = _mm512_castsi256_si512(sc);
    const __m512i lolohihi = _mm512_shuffle_i64x2(s, s, _MM_SHUFFLE(1, 1, 0, 0));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) o.s[k] = _mm512_shuffle_epi8(lolohihi, _mm512_load_si512(kCtrlQ3.b[k]));
    o.m = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc, _mm256_set1_epi16(-4)));
    o.d = half_at(p + offsetof(BlockQ3_K, d));
  }
};

// One token's super-block into SbAct, the weight type's byte order.
template <class W>
void repack(const BlockQ8K& b, SbAct& a) {
  for (int k = 0; k < 4; ++k)
    for (int g = 0; g < 4; ++g) std::memcpy(a.x[k] + 16 * g, b.qs + 16 * W::kGroups[k][g], 16);
  for (int i = 0; i < 16; ++i) {
    if constexpr (W::kPairBsums)
      a.bsums[i] = i < 8 ? static_cast<int16_t>(b.bsums[2 * i] + b.bsums[2 * i + 1]) : 0;
    else
      a.bsums[i] = b.bsums[i];
  }
  a.dx = b.d;
  std::memset(a.pad, 0, sizeof a.pad);
}

// One decoded super-block against one token's SbAct, into acc.
template <class W>
NEXUS_ALWAYS_INLINE void sb_step(const Sb& s, const SbAct& a, __m512& acc) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i isum = zero;
  if constexpr (W::kPairDots) {
#pragma GCC unroll 2
    for (int k = 0; k < 4; k += 2) {
      __m512i dot = _mm512_dpbusd_epi32(zero, s.w[k], _mm512_load_si512(a.x[k]));
      dot = _mm512_dpbusd_epi32(dot, s.w[k + 1], _mm512_load_si512(a.x[k + 1]));
      isum = _mm512_dpwssd_epi32(isum, dot, s.s[k]);
    }
  } else {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i dot = _mm512_dpbusd_epi32(zero, s.w[k], _mm512_load_si512(a.x[k]));
      isum = _mm512_dpwssd_epi32(isum, dot, s.s[k]);
    }
  }
  const __m512i bsums = _mm512_zextsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(a.bsums)));
  const __m512 dx = _mm512_set1_ps(a.dx);
  if constexpr (W::kHasMin) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(s.d, dx), acc);
    const __m512i msum = _mm512_dpwssd_epi32(zero, bsums, s.m);
    acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(s.dmin, dx), acc);
  } else {
    isum = _mm512_dpwssd_epi32(isum, bsums, s.m);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(s.d, dx), acc);
  }
}

// How far ahead of the loads the weight stream is prefetched into L1 and
// L2: the distances of gemm_quant_avx512.cpp's prefetch_distances(), tuned
// there for Q4_0 / Q8_0 decode on Intel Xeon and AMD Zen 5 VMs (the K-quants
// stream the same way, one row after another).
struct PrefetchDistances {
  size_t l1, l2;
};
const PrefetchDistances& prefetch_distances() {
  static const PrefetchDistances d = cpu_features().amd ? PrefetchDistances{2048, 12288} : PrefetchDistances{2048, 6144};
  return d;
}

constexpr int kTokens = 4;      // tokens per tile
constexpr int64_t kChunk = 64;  // tokens repacked at a time (1.4 MB of SbAct at 11008 columns)

// One weight row (nb super-blocks) against T tokens' SbActs (nb apart): y[t * ldy].
template <class W, int T>
void tile(const uint8_t* row, int64_t nb, const SbAct* a, float* y, int64_t ldy) {
  const size_t pf_l1 = prefetch_distances().l1, pf_l2 = prefetch_distances().l2;
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = row + b * W::kBytes;
    // Past the row's end this touches the next row (rows are contiguous) or
    // memory after the matrix: a prefetch never faults.
    const char* here = reinterpret_cast<const char*>(p);
#pragma GCC unroll 4
    for (size_t i = 0; i < W::kBytes; i += 64) {
      _mm_prefetch(here + pf_l2 + i, _MM_HINT_T1);
      _mm_prefetch(here + pf_l1 + i, _MM_HINT_T0);
    }
    Sb s;
    W::decode(p, s);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) sb_step<W>(s, a[t * nb + b], acc[t]);
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) y[t * ldy] = _mm512_reduce_add_ps(acc[t]);
}

template <class W>
void kquant_rows512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t nb, const BlockQ8K* x,
                    int64_t n_tokens, float* y, int64_t ldy) {
  thread_local std::vector<SbAct> acts;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kChunk) {
    const int64_t nt = std::min(kChunk, n_tokens - t0);
    if (acts.size() < static_cast<size_t>(nt * nb)) acts.resize(static_cast<size_t>(nt * nb));
    for (int64_t i = 0; i < nt * nb; ++i) repack<W>(x[t0 * nb + i], acts[static_cast<size_t>(i)]);
    const SbAct* a = acts.data();
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float* yr = y + t0 * ldy + r;
      int64_t t = 0;
      for (; t + kTokens <= nt; t += kTokens) tile<W, kTokens>(row, nb, a + t * nb, yr + t * ldy, ldy);
      switch (nt - t) {
        case 3: tile<W, 3>(row, nb, a + t * nb, yr + t * ldy, ldy); break;
        case 2: tile<W, 2>(row, nb, a + t * nb, yr + t * ldy, ldy); break;
        case 1: tile<W, 1>(row, nb, a + t * nb, yr + t * ldy, ldy); break;
        default: break;
      }
    }
  }
}

}  // namespace

#define NEXUS_KQUANT_AVX512(name, W)                                                                          \
  NEXUS_GEMM_KERNEL(name) {                                                                                    \
    kquant_rows512<W>(w, row_bytes, r0, r1, n_cols / kQK_K, static_cast<const BlockQ8K*>(x), n_tokens, y, ldy); \
  }
NEXUS_KQUANT_AVX512(gemm_q2_k_avx512, Q2K)
NEXUS_KQUANT_AVX512(gemm_q3_k_avx512, Q3K)
NEXUS_KQUANT_AVX512(gemm_q4_k_avx512, Q4K)
NEXUS_KQUANT_AVX512(gemm_q5_k_avx512, Q5K)
NEXUS_KQUANT_AVX512(gemm_q6_k_avx512, Q6K)
#undef NEXUS_KQUANT_AVX512

}  // namespace nexus
