// AVX-512 VNNI prefill kernels (many tokens) for Q8_0 / Q4_0 weights, for CPUs
// without AMX: a register-blocked GEMM of 16 weight rows x up to 12 tokens.
//
// Why not the vector (decode) kernels: they hold one weight row against 4
// tokens in 256-bit registers and spend, per block and token, a sign fix-up,
// a horizontal reduction's worth of shuffles and a scalar scale. Here one
// 512-bit register holds the int32 sums of 16 rows for one token, so a block
// (32 values) costs 8 vpdpbusd per (16 rows, token), each taking its four
// activation bytes as an embedded broadcast from memory, plus one convert,
// one multiply and one FMA to scale it (dw[16 rows] * dx[token]) into float
// accumulators, and the 16 results land contiguously in y's [token][row]
// layout.
//
// Layouts, built per call (amortised over all tokens of the step):
// - Weight panel (16 rows, every block), per block 576 bytes:
//     w[8][16][4] uint8 (vpdpbusd's unsigned operand): for k-group g (values
//       4g..4g+3 of the block), row m's four values at dword m; Q8_0 as
//       q + 128, Q4_0 as its nibble (q + 8 of the value q);
//     dw[16] float: the rows' scales.
//   Read row by row from the GGUF rows and transposed (vpermt2d).
// - Activations, per 12-token tile and block: xa[12][32] int8 (the signed,
//   broadcast operand), dx[12] float, and corr[12] int32 = -bias * sum(q)
//   (bias 128 for Q8_0, 8 for Q4_0), the start value of each int32 block sum,
//   which cancels the weights' bias exactly.
//
// Per (row, token) the arithmetic is the same sequence whatever n_tokens or
// the row range (r0, r1): int32 block sums (exact), then, block by block in
// order, acc = fma(float(sum), dw * dx, acc). So a token's result does not
// depend on the batch it came in, nor on the thread split.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
// (src/CMakeLists.txt); selected by matmul() for 16+ tokens when the CPU has
// AVX-512 VNNI and no AMX (NEXUS_KERNELS=avx512_prefill selects it on AMX
// CPUs too, to compare). On a Zen 5 core it runs a 5632x2048 Q8_0 or Q4_0
// product of 128 tokens in ~5.4 ms (~270 G int8 MAC/s), ~5x the decode
// kernels.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/x86/gemm_prefill_avx512.h"
#include "kernels/quant_blocks.h"
#include "kernels/x86/next_panel.h"

namespace nexus {
namespace {

constexpr int kRows = 16;    // weight rows per panel (one zmm of int32 / float)
constexpr int kTokens = 12;  // tokens per register tile: 12 int32 + 12 float accumulators + w + dw of 32 zmm
constexpr int kPanelBlockBytes = 8 * 64 + 64;  // w, dw
constexpr int kActBlockBytes = kTokens * 32;

struct alignas(64) Line {  // a cache line: vector<Line> is 64-byte aligned
  uint8_t bytes[64];
};

struct PackedActs {
  std::vector<int8_t> xa;     // [n_tiles][n_blocks][kTokens][32]
  std::vector<float> dx;      // [n_tiles][n_blocks][kTokens]
  std::vector<int32_t> corr;  // [n_tiles][n_blocks][kTokens]
};

// bias: what the weight panel adds to every weight value (128 or 8).
void pack_acts(const BlockQ8Act* x, int64_t n_tokens, int64_t n_blocks, int32_t bias, PackedActs& p) {
  const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
  p.xa.resize(static_cast<size_t>(n_tiles * n_blocks * kActBlockBytes));
  p.dx.resize(static_cast<size_t>(n_tiles * n_blocks * kTokens));
  p.corr.resize(static_cast<size_t>(n_tiles * n_blocks * kTokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t tile = t / kTokens, n = t % kTokens;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const BlockQ8Act& xb = x[t * n_blocks + b];
      const int64_t at = tile * n_blocks + b;
      std::memcpy(&p.xa[static_cast<size_t>(at * kActBlockBytes + n * 32)], xb.qs, 32);
      p.dx[static_cast<size_t>(at * kTokens + n)] = xb.d;
      p.corr[static_cast<size_t>(at * kTokens + n)] = -bias * xb.qsum;
    }
  }
}

// vpermt2d index vectors of the 16 x 8 dword transpose in pack_panel.
struct TransposeIdx {
  __m512i l1[2], l2[2], l3[2];
  TransposeIdx() {
    alignas(64) int32_t v[16];
    for (int h = 0; h < 2; ++h) {  // rows 4i..4i+3, k = 4h + l / 4, row 4i + l % 4
      for (int l = 0; l < 16; ++l) v[l] = ((l & 3) >> 1) * 16 + (l & 1) * 8 + 4 * h + (l >> 2);
      l1[h] = _mm512_load_si512(v);
    }
    for (int q = 0; q < 2; ++q) {  // rows 8i..8i+7, k = 4h + 2q + l / 8, row 8i + l % 8
      for (int l = 0; l < 16; ++l) v[l] = ((l & 7) >> 2) * 16 + (2 * q + (l >> 3)) * 4 + (l & 3);
      l2[q] = _mm512_load_si512(v);
    }
    for (int e = 0; e < 2; ++e) {  // rows 0..15 of k = 4h + 2q + e
      for (int l = 0; l < 16; ++l) v[l] = (l >> 3) * 16 + e * 8 + (l & 7);
      l3[e] = _mm512_load_si512(v);
    }
  }
};

// z[j] holds rows 2j (dwords 0..7 in lanes 0..7) and 2j + 1 (lanes 8..15),
// dword k = values 4k..4k+3 of the block. Out: g[k] = dword k of rows 0..15.
inline void transpose16x8(const __m512i* z, __m512i* g, const TransposeIdx& ix) {
  __m512i a[4][2], b[2][4];
  for (int i = 0; i < 4; ++i)
    for (int h = 0; h < 2; ++h) a[i][h] = _mm512_permutex2var_epi32(z[2 * i], ix.l1[h], z[2 * i + 1]);
  for (int i = 0; i < 2; ++i)
    for (int h = 0; h < 2; ++h)
      for (int q = 0; q < 2; ++q) b[i][2 * h + q] = _mm512_permutex2var_epi32(a[2 * i][h], ix.l2[q], a[2 * i + 1][h]);
  for (int hq = 0; hq < 4; ++hq)
    for (int e = 0; e < 2; ++e) g[2 * hq + e] = _mm512_permutex2var_epi32(b[0][hq], ix.l3[e], b[1][hq]);
}

// Rows [row0, row0 + n_rows) (n_rows <= 16) into the panel layout above.
// Lanes past n_rows repeat the last row: lanes are independent and those
// are never stored, so they need only be finite (no read past r1).
template <class Block>
void pack_panel(const uint8_t* w, size_t row_bytes, int64_t row0, int n_rows, int64_t n_blocks, uint8_t* panel) {
  static const TransposeIdx ix;
  const __mmask16 valid = static_cast<__mmask16>((1u << n_rows) - 1);
  const __m512i offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const uint8_t* rows[kRows];
  for (int m = 0; m < kRows; ++m) rows[m] = w + (row0 + std::min(m, n_rows - 1)) * static_cast<int64_t>(row_bytes) + 2;
  const uint8_t* base = w + row0 * static_cast<int64_t>(row_bytes);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * static_cast<int64_t>(sizeof(Block));
    uint8_t* dst = panel + b * kPanelBlockBytes;
    __m512i z[8], g[8];
    if constexpr (sizeof(Block) == sizeof(BlockQ8_0)) {
      for (int j = 0; j < 8; ++j)
        z[j] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[2 * j] + off))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[2 * j + 1] + off)), 1);
      for (int j = 0; j < 8; ++j) z[j] = _mm512_xor_si512(z[j], _mm512_set1_epi8(static_cast<char>(0x80)));
    } else {
      // Byte j holds value j (low nibble) and value j + 16 (high nibble):
      // lanes [a, a, b, b] of 16 bytes, low nibbles of the 1st and 3rd.
      const __m512i low4 = _mm512_set1_epi8(0x0f);
      for (int j = 0; j < 8; ++j) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[2 * j] + off));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[2 * j + 1] + off));
        const __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(a)),
                                               _mm256_broadcastsi128_si256(c), 1);
        const __m512i nib = _mm512_mask_blend_epi64(0xcc, raw, _mm512_srli_epi16(raw, 4));
        z[j] = _mm512_and_si512(nib, low4);
      }
    }
    transpose16x8(z, g, ix);
    for (int k = 0; k < 8; ++k) _mm512_store_si512(dst + 64 * k, g[k]);
    const __m512i d16 = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets, base + off, 1);
    _mm512_store_ps(dst + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d16)));
  }
}

// acc += u8 x s8 products of w (16 dwords) with the four bytes at p, broadcast.
// Inline asm: GCC does not fold _mm512_set1_epi32(*p) into vpdpbusd's
// embedded broadcast, which would cost a separate vpbroadcastd per product.
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

using Prefetch = NextPanel<kRows>;  // the next panel, fetched during this one (next_panel.h)

// One panel against T tokens (T <= kTokens) of one activation tile: y[t * ldy
// + row] for the panel's rows in `rows`.
template <int T>
void panel_tile(const uint8_t* panel, int64_t n_blocks, const int8_t* xa, const float* dx, const int32_t* corr,
                float* y, int64_t ldy, __mmask16 rows, Prefetch& next) {
  // Fully unrolled so that acc[] and s[] live in zmm registers (GCC keeps
  // them in memory and copies them around otherwise).
  __m512 acc[T];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* pb = panel + b * kPanelBlockBytes;
    const int8_t* xb = xa + b * kActBlockBytes;
    const float* db = dx + b * kTokens;
    const int32_t* cb = corr + b * kTokens;
    next.step();
    __m512i s[T];
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) s[t] = _mm512_set1_epi32(cb[t]);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i wk = _mm512_load_si512(pb + 64 * k);
#pragma GCC unroll 12
      for (int t = 0; t < T; ++t) s[t] = dpbusd_bcast(s[t], wk, xb + 32 * t + 4 * k);
    }
    const __m512 dw = _mm512_load_ps(pb + 512);
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(dw, _mm512_set1_ps(db[t])), acc[t]);
  }
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows, acc[t]);
}

using TileFn = void (*)(const uint8_t*, int64_t, const int8_t*, const float*, const int32_t*, float*, int64_t, __mmask16,
                       Prefetch&);

template <int... T>
constexpr auto make_tile_table(std::integer_sequence<int, T...>) {
  return std::array<TileFn, sizeof...(T)>{panel_tile<T + 1>...};
}

template <class Block>
void prefill_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
                  int64_t n_tokens, float* y, int64_t ldy) {
  static constexpr auto tiles = make_tile_table(std::make_integer_sequence<int, kTokens>{});
  thread_local PackedActs acts;
  thread_local std::vector<Line> panel_buf;
  pack_acts(x, n_tokens, n_blocks, sizeof(Block) == sizeof(BlockQ8_0) ? 128 : 8, acts);
  panel_buf.resize(static_cast<size_t>(n_blocks * kPanelBlockBytes / 64));
  auto* panel = reinterpret_cast<uint8_t*>(panel_buf.data());
  const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
  for (int64_t row0 = r0; row0 < r1; row0 += kRows) {
    const int n_rows = static_cast<int>(std::min<int64_t>(kRows, r1 - row0));
    pack_panel<Block>(w, row_bytes, row0, n_rows, n_blocks, panel);
    const __mmask16 rows = static_cast<__mmask16>((1u << n_rows) - 1);
    Prefetch next = Prefetch::rows(w, row_bytes, row0 + kRows, r1, static_cast<size_t>(n_blocks) * sizeof(Block),
                                   n_tiles * n_blocks);
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      const int64_t t0 = tile * kTokens;
      const int n = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
      tiles[static_cast<size_t>(n - 1)](panel, n_blocks, &acts.xa[static_cast<size_t>(tile * n_blocks * kActBlockBytes)],
                                        &acts.dx[static_cast<size_t>(tile * n_blocks * kTokens)],
                                        &acts.corr[static_cast<size_t>(tile * n_blocks * kTokens)], y + t0 * ldy + row0,
                                        ldy, rows, next);
    }
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_q8_0_prefill_avx512) {
  prefill_rows<BlockQ8_0>(w, row_bytes, r0, r1, n_cols / 32, static_cast<const BlockQ8Act*>(x), n_tokens, y, ldy);
}

NEXUS_GEMM_KERNEL(gemm_q4_0_prefill_avx512) {
  prefill_rows<BlockQ4_0>(w, row_bytes, r0, r1, n_cols / 32, static_cast<const BlockQ8Act*>(x), n_tokens, y, ldy);
}

}  // namespace nexus
