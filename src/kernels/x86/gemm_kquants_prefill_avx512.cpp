// AVX-512 VNNI prefill kernels (many tokens) for Q4_K / Q5_K / Q6_K weights
// (gemm_kquants_prefill_avx512.h): a register-blocked GEMM of 16 weight rows
// x up to 8 tokens, the K-quant counterpart of gemm_prefill_avx512.cpp.
//
// One zmm holds an int32 sum of 16 rows for one token. Per super-block and
// sub-block j (Q4_K / Q5_K: 8 of 32 values, Q6_K: 16 of 16):
//   s[t]    = vpdpbusd chain over the sub-block's 4-value groups, the weight
//             panel's 16 rows x 4 unsigned levels against the token's 4
//             activation bytes as an embedded broadcast (8 resp. 4 steps);
//   isum[t] += s[t] * scale_j[16 rows]                      (vpmulld, exact)
// then per super-block: Q6_K acc[t] += float(isum[t]) * (d[16 rows] * x.d[t]);
// Q4_K / Q5_K acc[t] += (float(isum[t]) * d - float(msum[t]) * dmin) * x.d[t],
// msum = sum over j of min_j * (sum of x_q over sub-block j), four vpdpwssd of
// the rows' (min, min) int16 pairs against the token's broadcast bsum pairs.
// Q6_K's levels are stored as q + 32 (unsigned); each s[t] chain starts at
// -32 * bsums[j] of its token, which cancels that offset exactly.
//
// Why not the decode kernels: they scale every 64-value vpdpbusd result per
// (row, token) (vpdpwssd) and convert and scale 16 float lanes per
// (super-block, row, token); here one vpmulld serves 16 rows x 32 (Q6_K: 16)
// values and one convert / FMA 16 rows x 256, so vpdpbusd is ~80% (Q6_K ~70%)
// of the work.
//
// Layouts, built per call:
// - Weight panel (16 rows, every super-block; PanelSb): w[64][16][4] levels,
//   group g = values 4g .. 4g + 3 of row m at dword m; the scales as int32
//   per row, Q4_K / Q5_K's mins as (min 2p, min 2p + 1) int16 pairs, d and
//   dmin as float. Built by transposing the 16 rows' blocks to dwords (16 x
//   8-dword transposes, one vector per dword of the block) and unpacking
//   nibbles, high bits and scales in those vectors. Lanes past the row range
//   repeat its last row (they are never stored; nothing past r1 is read).
// - Activations, per 8-token tile and super-block (ActSb): the tokens' 256
//   bytes, x.d, and Q4_K / Q5_K's bsum pairs (sums per 32, as int16 pairs) or
//   Q6_K's -32 * bsums.
//
// Per (row, token) the arithmetic is the same whatever n_tokens, the tile
// or the row range: exact integer sums, then super-block by super-block in
// order the same FMAs into one float. So a token's result does not depend
// on the batch it came in, nor on the thread split.
//
// Measured on the shared 2-core AMD EPYC VM this was written on (3.5 GHz,
// zmm vpdpbusd / vpmulld / vpdpwssd / FMA / vmulps 1 per cycle in all, so
// 224 G int8 MAC/s at most), one thread, thread CPU time, best of 9, 128
// tokens: Q4_K 5632 x 2048 8.5 ms (174 G MAC/s), 2048 x 5632 8.5 ms; Q5_K
// 8.4 ms; Q6_K 8.9 ms (167 G MAC/s). The decode kernels take 21.1 (Q4_K),
// 25.2 (Q5_K), 21.4 ms (Q6_K) for the same products. Fixed cost (panel
// packing) ~0.45 ms per 5632 x 2048 Q4_K weight: at 8 tokens 1.05 ms against
// the decode kernel's 1.6 ms (it was 0.9 ms before the packing loops were
// unrolled). vpdpbusd is the bound: 64 of them per (16 rows, token,
// super-block) against 8 vpmulld, 4 vpdpwssd and 3 float ops (Q6_K: 16
// vpmulld, 2 float ops). Scaling isum and msum by d x.d and dmin x.d
// separately (one vmulps more) measured within noise (~2% slower).
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
// (src/CMakeLists.txt).
#include "kernels/x86/gemm_kquants_prefill_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/next_panel.h"

namespace nexus {
namespace {

#define NEXUS_ALWAYS_INLINE inline __attribute__((always_inline))

constexpr int kRows = 16;   // weight rows per panel (one zmm of int32 / float)
constexpr int kTokens = 8;  // tokens per tile: 8 x (s, isum, acc) + weights + scales of 32 zmm

// One super-block of a 16-row panel. kSub: sub-blocks (8 of 32 or 16 of 16).
template <int kSub, bool kMin>
struct alignas(64) PanelSb {
  uint8_t w[64][64];         // group g, row m: dword m of w[g]
  int32_t sc[kSub][16];      // scale of sub-block j, row m
  int32_t mn[kMin ? 4 : 1][16];  // (min 2p, min 2p + 1) as int16 pair, row m
  float d[16], dmin[16];
};

// One super-block of an 8-token tile.
template <int kSub, bool kMin>
struct alignas(64) ActSb {
  int8_t x[kTokens][256];
  float dx[16];                           // 0..7 used
  int32_t extra[kTokens][kMin ? 4 : 16];  // kMin: bsum pairs (p: sums per 32 of 2p, 2p + 1); else -32 * bsums[j]
};

// acc += u8 x s8 products of w (16 dwords) with the four bytes at p,
// broadcast; acc += s16 x s16 pair products likewise. Inline asm: GCC does
// not fold _mm512_set1_epi32(*p) into the embedded broadcast.
NEXUS_ALWAYS_INLINE __m512i dpbusd_bcast(__m512i acc, __m512i w, const void* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}
NEXUS_ALWAYS_INLINE __m512i dpwssd_bcast(__m512i acc, __m512i w, const void* p) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

// 16 rows of 8 dwords -> 8 vectors of 16 rows. z[j] = row j (dwords in lanes
// 0..7) and row j + 8 (lanes 8..15); out[k] = dword k of rows 0..15. Two
// rounds of unpacks transpose 4 x 4 blocks inside each 128-bit lane, then
// vpermt2q puts the lanes' halves together.
NEXUS_ALWAYS_INLINE void transpose16x8(const __m512i* z, __m512i* out) {
  __m512i t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 2; ++i) {  // rows 4i .. 4i + 3: u[4i + c] = dwords c (lanes 0, 2) and c + 4 (lanes 1, 3)
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), second = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 8
  for (int c = 0; c < 4; ++c) {
    out[c] = _mm512_permutex2var_epi64(u[c], first, u[4 + c]);
    out[c + 4] = _mm512_permutex2var_epi64(u[c], second, u[4 + c]);
  }
}

// v shifted left by S bits (right for S < 0) in each dword.
template <int S>
NEXUS_ALWAYS_INLINE __m512i shift32(__m512i v) {
  if constexpr (S > 0) return _mm512_slli_epi32(v, S);
  else if constexpr (S < 0) return _mm512_srli_epi32(v, -S);
  else return v;
}
// (a & 0x0f) | b, per byte (b holds bits 4..7 only).
NEXUS_ALWAYS_INLINE __m512i low_nibble_or(__m512i a, __m512i b) {
  return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(0x0f), 0xec);
}
// The fp16 values in bits shift .. shift + 15 of each dword, as float.
NEXUS_ALWAYS_INLINE __m512 halves_to_float(__m512i dwords, int shift) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dwords, shift)));
}

// The traits below turn one super-block of 16 rows, transposed to dwords
// (blk[i] = dword i of the block for rows 0..15), into a PanelSb. Levels
// follow kquant_unpack.h's value order.

// Q4_K / Q5_K: 8 sub-blocks of 32, mins. Value 64 c + l is the low nibble of
// qs[32 c + l], + 32 the high one, so dword 8 c + k of qs gives groups
// 16 c + k (low nibbles) and 16 c + 8 + k (high); Q5_K's fifth bit of value v
// is bit v / 32 of qh[v % 32]: bit 2c (2c + 1 for the high nibbles) of qh's
// dword k.
template <class Block, bool kFifthBit>
struct Q45 {
  using B = Block;
  static constexpr int kSub = 8;
  static constexpr bool kMin = true;
  static constexpr int kQs = offsetof(Block, qs) / 4;

  template <int C>
  static NEXUS_ALWAYS_INLINE void chunk(const __m512i* blk, PanelSb<kSub, kMin>& o) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i v = blk[kQs + 8 * C + k];
      __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      if constexpr (kFifthBit) {
        // Bit 2C (2C + 1) of each qh byte to bit 4 of the same byte; the
        // mask keeps only that bit, so the 32-bit shifts leak nothing.
        const __m512i qh = blk[offsetof(BlockQ5_K, qh) / 4 + k], bit4 = _mm512_set1_epi8(0x10);
        lo = _mm512_or_si512(lo, _mm512_and_si512(shift32<4 - 2 * C>(qh), bit4));
        hi = _mm512_or_si512(hi, _mm512_and_si512(shift32<3 - 2 * C>(qh), bit4));
      }
      _mm512_store_si512(o.w[16 * C + k], lo);
      _mm512_store_si512(o.w[16 * C + 8 + k], hi);
    }
  }
  // Scales as unpack_q4k_scales: dwords A, B, C of the 12 bytes give scales
  // 0..3 = A & 63, mins 0..3 = B & 63, scales 4..7 = (C & 15) | (A >> 6) << 4,
  // mins 4..7 = (C >> 4) | (B >> 6) << 4, per byte.
  static NEXUS_ALWAYS_INLINE void extract(const __m512i* blk, PanelSb<kSub, kMin>& o) {
    chunk<0>(blk, o);
    chunk<1>(blk, o);
    chunk<2>(blk, o);
    chunk<3>(blk, o);
    constexpr int kSc = offsetof(Block, scales) / 4;
    const __m512i a = blk[kSc], b = blk[kSc + 1], c = blk[kSc + 2];
    const __m512i m6 = _mm512_set1_epi8(63), m4 = _mm512_set1_epi8(15), top = _mm512_set1_epi8(0x30);
    const __m512i s_lo = _mm512_and_si512(a, m6), m_lo = _mm512_and_si512(b, m6);
    const __m512i s_hi = _mm512_or_si512(_mm512_and_si512(c, m4), _mm512_and_si512(_mm512_srli_epi32(a, 2), top));
    const __m512i m_hi =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(c, 4), m4), _mm512_and_si512(_mm512_srli_epi32(b, 2), top));
    const __m512i byte = _mm512_set1_epi32(0xff);
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) {
      _mm512_store_si512(o.sc[j], _mm512_and_si512(_mm512_srli_epi32(s_lo, 8 * j), byte));
      _mm512_store_si512(o.sc[4 + j], _mm512_and_si512(_mm512_srli_epi32(s_hi, 8 * j), byte));
    }
    // Bytes (b0 b1 b2 b3) of each dword -> int16 pairs (b0, b1) and (b2, b3).
    const __m512i ctrl01 = _mm512_set4_epi32(0x800d800c, 0x80098008, 0x80058004, 0x80018000);
    const __m512i ctrl23 = _mm512_set4_epi32(0x800f800e, 0x800b800a, 0x80078006, 0x80038002);
    _mm512_store_si512(o.mn[0], _mm512_shuffle_epi8(m_lo, ctrl01));
    _mm512_store_si512(o.mn[1], _mm512_shuffle_epi8(m_lo, ctrl23));
    _mm512_store_si512(o.mn[2], _mm512_shuffle_epi8(m_hi, ctrl01));
    _mm512_store_si512(o.mn[3], _mm512_shuffle_epi8(m_hi, ctrl23));
    static_assert(offsetof(Block, d) == 0 && offsetof(Block, dmin) == 2);
    _mm512_store_ps(o.d, halves_to_float(blk[0], 0));
    _mm512_store_ps(o.dmin, halves_to_float(blk[0], 16));
  }
  static void act_extra(const BlockQ8K& x, int32_t* extra) {
    for (int p = 0; p < 4; ++p) {
      const int lo = x.bsums[4 * p] + x.bsums[4 * p + 1], hi = x.bsums[4 * p + 2] + x.bsums[4 * p + 3];
      extra[p] = static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xffffu) | static_cast<uint32_t>(hi) << 16);
    }
  }
};
using Q4K = Q45<BlockQ4_K, false>;
using Q5K = Q45<BlockQ5_K, true>;

// Q6_K: 16 sub-blocks of 16, levels q + 32 (0..63), no mins. The low nibble
// of ql[64 h + b] (b < 64) is value 128 h + b, the high one 128 h + 64 + b; the
// top 2 bits of value 128 h + 32 kk + l are bits 2 kk, 2 kk + 1 of qh[32 h + l].
// So ql's dword 16 h + 8 e + k gives groups 32 h + 8 e + k (low nibbles, kk =
// e) and + 16 (high, kk = 2 + e), both with qh's dword 8 h + k.
struct Q6K {
  using B = BlockQ6_K;
  static constexpr int kSub = 16;
  static constexpr bool kMin = false;

  template <int H, int E>
  static NEXUS_ALWAYS_INLINE void chunk(const __m512i* blk, PanelSb<kSub, kMin>& o) {
    const __m512i top2 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i v = blk[16 * H + 8 * E + k];
      const __m512i qh = blk[offsetof(BlockQ6_K, qh) / 4 + 8 * H + k];
      // Bits 2kk, 2kk + 1 of each qh byte to bits 4, 5 (masked: nothing leaks).
      const __m512i top_lo = _mm512_and_si512(shift32<4 - 2 * E>(qh), top2);
      const __m512i top_hi = _mm512_and_si512(shift32<-2 * E>(qh), top2);
      _mm512_store_si512(o.w[32 * H + 8 * E + k], low_nibble_or(v, top_lo));
      _mm512_store_si512(o.w[32 * H + 16 + 8 * E + k], low_nibble_or(_mm512_srli_epi16(v, 4), top_hi));
    }
  }
  static NEXUS_ALWAYS_INLINE void extract(const __m512i* blk, PanelSb<kSub, kMin>& o) {
    chunk<0, 0>(blk, o);
    chunk<0, 1>(blk, o);
    chunk<1, 0>(blk, o);
    chunk<1, 1>(blk, o);
    constexpr int kSc = offsetof(BlockQ6_K, scales) / 4;
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 4; ++k)
        _mm512_store_si512(o.sc[4 * i + k], _mm512_srai_epi32(_mm512_slli_epi32(blk[kSc + i], 24 - 8 * k), 24));
    static_assert(offsetof(BlockQ6_K, d) % 4 == 0);
    _mm512_store_ps(o.d, halves_to_float(blk[offsetof(BlockQ6_K, d) / 4], 0));
  }
  static void act_extra(const BlockQ8K& x, int32_t* extra) {
    for (int j = 0; j < 16; ++j) extra[j] = -32 * x.bsums[j];
  }
};

template <class W>
using Panel = PanelSb<W::kSub, W::kMin>;
template <class W>
using Act = ActSb<W::kSub, W::kMin>;

// 32 bytes at p, of which only the first n (< 32: the block's end) are read.
NEXUS_ALWAYS_INLINE __m256i load_upto32(const uint8_t* p, int n) {
  if (n >= 32) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_maskz_loadu_epi8(static_cast<__mmask32>((1u << n) - 1), p);
}

// Rows [row0, row0 + n_rows) (n_rows <= 16), every super-block, into the
// panel: each block of the 16 rows transposed to dwords, 8 at a time (zero
// past the block's end), then unpacked in registers.
template <class W>
void pack_panel(const uint8_t* w, size_t row_bytes, int64_t row0, int n_rows, int64_t nb, Panel<W>* panel) {
  constexpr int kBytes = sizeof(typename W::B), kChunks = (kBytes + 31) / 32;
  const uint8_t* rows[kRows];
  for (int m = 0; m < kRows; ++m) rows[m] = w + (row0 + std::min(m, n_rows - 1)) * static_cast<int64_t>(row_bytes);
  for (int64_t b = 0; b < nb; ++b) {
    const size_t at = static_cast<size_t>(b) * kBytes;
    __m512i blk[8 * kChunks];
#pragma GCC unroll 8
    for (int q = 0; q < kChunks; ++q) {
      __m512i z[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(load_upto32(rows[j] + at + 32 * q, kBytes - 32 * q)),
                                  load_upto32(rows[j + 8] + at + 32 * q, kBytes - 32 * q), 1);
      transpose16x8(z, blk + 8 * q);
    }
    W::extract(blk, panel[b]);
  }
}

template <class W>
void pack_acts(const BlockQ8K* x, int64_t n_tokens, int64_t nb, std::vector<Act<W>>& out) {
  const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
  if (out.size() < static_cast<size_t>(n_tiles * nb)) out.resize(static_cast<size_t>(n_tiles * nb));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8K& xb = x[t * nb + b];
      Act<W>& a = out[static_cast<size_t>(t / kTokens * nb + b)];
      const int n = static_cast<int>(t % kTokens);
      std::memcpy(a.x[n], xb.qs, 256);
      a.dx[n] = xb.d;
      W::act_extra(xb, a.extra[n]);
    }
}

using Prefetch = NextPanel<kRows>;  // the next panel, fetched during this one (next_panel.h)

// One panel against T tokens (T <= kTokens) of one tile: y[t * ldy + row] for
// the panel's rows in `rows`.
template <class W, int T>
void panel_tile(const Panel<W>* panel, const Act<W>* act, int64_t nb, float* y, int64_t ldy, __mmask16 rows,
                Prefetch& next) {
  constexpr int kGroups = 64 / W::kSub;  // 4-value groups per sub-block
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Panel<W>& p = panel[b];
    const Act<W>& a = act[b];
    next.step();
    __m512i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int j = 0; j < W::kSub; ++j) {
      __m512i s[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[t] = W::kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(a.extra[t][j]);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        const int k = j * kGroups + g;
        const __m512i wk = _mm512_load_si512(p.w[k]);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) s[t] = dpbusd_bcast(s[t], wk, a.x[t] + 4 * k);
      }
      const __m512i sc = _mm512_load_si512(p.sc[j]);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t], sc));
    }
    const __m512 d = _mm512_load_ps(p.d);
    if constexpr (W::kMin) {
      const __m512 dmin = _mm512_load_ps(p.dmin);
      const __m512i m0 = _mm512_load_si512(p.mn[0]), m1 = _mm512_load_si512(p.mn[1]);
      const __m512i m2 = _mm512_load_si512(p.mn[2]), m3 = _mm512_load_si512(p.mn[3]);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        __m512i msum = dpwssd_bcast(_mm512_setzero_si512(), m0, &a.extra[t][0]);
        msum = dpwssd_bcast(msum, m1, &a.extra[t][1]);
        msum = dpwssd_bcast(msum, m2, &a.extra[t][2]);
        msum = dpwssd_bcast(msum, m3, &a.extra[t][3]);
        // (isum d - msum dmin) x.d: one multiply fewer than scaling each by d x.d, dmin x.d.
        const __m512 part = _mm512_fmsub_ps(_mm512_cvtepi32_ps(isum[t]), d, _mm512_mul_ps(_mm512_cvtepi32_ps(msum), dmin));
        acc[t] = _mm512_fmadd_ps(part, _mm512_set1_ps(a.dx[t]), acc[t]);
      }
    } else {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, _mm512_set1_ps(a.dx[t])), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows, acc[t]);
}

template <class W>
using TileFn = void (*)(const Panel<W>*, const Act<W>*, int64_t, float*, int64_t, __mmask16, Prefetch&);

template <class W, int... T>
constexpr auto make_tile_table(std::integer_sequence<int, T...>) {
  return std::array<TileFn<W>, sizeof...(T)>{panel_tile<W, T + 1>...};
}

template <class W>
void prefill_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t nb, const BlockQ8K* x,
                  int64_t n_tokens, float* y, int64_t ldy) {
  static constexpr auto tiles = make_tile_table<W>(std::make_integer_sequence<int, kTokens>{});
  if (n_tokens <= 0) return;
  thread_local std::vector<Act<W>> acts;
  thread_local std::vector<Panel<W>> panel;
  pack_acts<W>(x, n_tokens, nb, acts);
  if (panel.size() < static_cast<size_t>(nb)) panel.resize(static_cast<size_t>(nb));
  const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
  for (int64_t row0 = r0; row0 < r1; row0 += kRows) {
    const int n_rows = static_cast<int>(std::min<int64_t>(kRows, r1 - row0));
    pack_panel<W>(w, row_bytes, row0, n_rows, nb, panel.data());
    const __mmask16 rows = static_cast<__mmask16>((1u << n_rows) - 1);
    Prefetch next = Prefetch::rows(w, row_bytes, row0 + kRows, r1, static_cast<size_t>(nb) * sizeof(typename W::B),
                                   n_tiles * nb);
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      const int64_t t0 = tile * kTokens;
      const int n = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
      tiles[static_cast<size_t>(n - 1)](panel.data(), &acts[static_cast<size_t>(tile * nb)], nb, y + t0 * ldy + row0, ldy,
                                        rows, next);
    }
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_q4_k_prefill_avx512) {
  prefill_rows<Q4K>(w, row_bytes, r0, r1, n_cols / kQK_K, static_cast<const BlockQ8K*>(x), n_tokens, y, ldy);
}

NEXUS_GEMM_KERNEL(gemm_q5_k_prefill_avx512) {
  prefill_rows<Q5K>(w, row_bytes, r0, r1, n_cols / kQK_K, static_cast<const BlockQ8K*>(x), n_tokens, y, ldy);
}

NEXUS_GEMM_KERNEL(gemm_q6_k_prefill_avx512) {
  prefill_rows<Q6K>(w, row_bytes, r0, r1, n_cols / kQK_K, static_cast<const BlockQ8K*>(x), n_tokens, y, ldy);
}

}  // namespace nexus
