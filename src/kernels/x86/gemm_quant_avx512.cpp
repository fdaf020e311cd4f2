// Q8_0 / Q4_0 weights against 8-bit activations with 512-bit VNNI
// (gemm_quant_avx512.h). Compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512dq -mavx512vnni (src/CMakeLists.txt).
//
// Each step covers one block pair (blocks 2p, 2p + 1) of one weight row
// against up to four tokens:
//   weight: two 16-byte (Q4_0) or 32-byte (Q8_0) loads put both blocks'
//           values in one 512-bit register, one AND (Q4_0) or XOR (Q8_0);
//           the two fp16 scales are broadcast to their block's lanes and
//           widened with one vcvtph2ps;
//   per token: vpdpbusd, vcvtdq2ps, vmulps (weight scale x activation
//           scale), vfmadd into that token's accumulator.
// The activations are repacked once per call (PairAct) into exactly the
// lane order the weight side produces: three aligned L1 loads per token.
//
// vpdpbusd multiplies unsigned by signed bytes. Q4_0's nibbles are used as
// unsigned 0..15 (low nibbles) and 16 * (0..15) (high nibbles, left in place
// by the AND; their activation scale is divided by 16, exact in binary), and
// Q8_0's values are shifted to unsigned by XOR 0x80 (+128). The offsets this
// adds, 8 * sum(x_q) and 128 * sum(x_q) per block, are removed by starting
// the vpdpbusd accumulator at -offset (BlockQ8Act::qsum): integer sums are
// exact, so this costs no instruction and changes no rounding.
//
// Measured on the Zen 5 VM this was written on (a direct loop over
// matmul(), one thread, CPU time, 32000 x 2048 weight read from DRAM):
// Q4_0 15 -> 27 GB/s, Q8_0 34 -> 38 GB/s against the 256-bit kernels of
// gemm_body.h.
//
// Determinism: each (row, token) has its own accumulators and sees the same
// operations in the same order (even pairs into one, odd pairs into the
// other, then their sum and its lane reduction) whether it is computed in a
// 4-token or 1-token tile, in any token chunk, or any row range.
#include "kernels/x86/gemm_quant_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

// One block pair of one token, in the kernels' lane order (see repack_*).
struct alignas(64) PairAct {
  int8_t qs[64];
  int32_t off[16];  // vpdpbusd start value: -(the unsigned shift) x qsum, in one lane per block
  float dx[16];     // activation scale per int32 lane
};
static_assert(sizeof(PairAct) == 192);

constexpr int kTokens = 4;      // tokens per tile
constexpr int64_t kChunk = 64;  // tokens repacked at a time (a 1 MB buffer at 5632 columns)

inline __m512i load_idx(const int16_t (&v)[32]) { return _mm512_loadu_si512(v); }

// fp16 scales d0, d1 (at p0, p1) -> 16 floats, lanes in groups of four:
// [d0 d0 d0 d0 d1 d1 d1 d1] twice.
inline __m512 scales_4x4(const uint8_t* p0, const uint8_t* p1) {
  uint16_t d0, d1;
  std::memcpy(&d0, p0, 2);
  std::memcpy(&d1, p1, 2);
  const __m128i h = _mm_unpacklo_epi64(_mm_set1_epi16(static_cast<short>(d0)), _mm_set1_epi16(static_cast<short>(d1)));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(h), h, 1));
}

// Q4_0: pair = 36 bytes: d0 (2), qs0 (16), d1 (2), qs1 (16). Weight lanes
// (bytes): [qs0 & 0x0f | qs1 & 0x0f | qs0 & 0xf0 | qs1 & 0xf0], i.e. values
// 0..15 of block 0, 0..15 of block 1, 16 x values 16..31 of block 0, then of
// block 1. int32 lanes 0-3 / 4-7 / 8-11 / 12-15 belong to blocks 0 / 1 / 0 / 1.
struct Q4 {
  static constexpr size_t kPairBytes = 36;
  static constexpr int32_t kShift = 8;
  static constexpr int16_t kQs[32] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17,
                                      1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17};
  static constexpr int16_t kD[32] = {0, 0, 0, 0, 9, 9, 9, 9, 0, 0, 0, 0, 9, 9, 9, 9};

  struct Consts {
    __m512i qs = load_idx(kQs), d = load_idx(kD);
    __m512i nib = _mm512_inserti64x4(_mm512_set1_epi8(0x0f), _mm256_set1_epi8(static_cast<char>(0xf0)), 1);
  };
  static void from(const Consts& c, __m512i z, __m512i& w, __m512& dw) {
    w = _mm512_and_si512(_mm512_permutexvar_epi16(c.qs, z), c.nib);
    dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(c.d, z)));
  }
  static void load(const Consts& c, const uint8_t* p, __m512i& w, __m512& dw) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 20));
    const __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    w = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(y), y, 1), c.nib);
    dw = scales_4x4(p, p + 18);
  }
  // A lone last block: read masked, the missing second block as zeros (scale 0).
  static void load_last(const Consts& c, const uint8_t* p, __m512i& w, __m512& dw) {
    from(c, _mm512_maskz_loadu_epi8((__mmask64{1} << 18) - 1, p), w, dw);
  }

  static void repack(const BlockQ8Act* x, int64_t n_blocks, PairAct* out) {
    for (int64_t p = 0; p < (n_blocks + 1) / 2; ++p) {
      PairAct& a = out[p];
      a = PairAct{};
      for (int h = 0; h < 2 && 2 * p + h < n_blocks; ++h) {
        const BlockQ8Act& b = x[2 * p + h];
        std::copy(b.qs, b.qs + 16, a.qs + 16 * h);
        std::copy(b.qs + 16, b.qs + 32, a.qs + 32 + 16 * h);
        a.off[4 * h] = -kShift * b.qsum;
        for (int i = 0; i < 4; ++i) {
          a.dx[4 * h + i] = b.d;
          a.dx[8 + 4 * h + i] = b.d * (1.0f / 16);  // high nibbles stay multiplied by 16
        }
      }
    }
  }
};

// Q8_0: pair = 68 bytes: d0 (2), qs0 (32), d1 (2), qs1 (32). Weight lanes
// (bytes): [qs0 ^ 0x80 | qs1 ^ 0x80]; int32 lanes 0-7 block 0, 8-15 block 1.
// (One 64-byte load per pair instead of two 32-byte ones reads DRAM at half
// the rate here: most such loads straddle two cache lines.)
struct Q8 {
  static constexpr size_t kPairBytes = 68;
  static constexpr int32_t kShift = 128;
  // For the lone last block, read as two masked 64-byte loads at +0 and +4:
  // vpermt2w takes words 1..16 of the first, then words 16..31 of the second.
  static constexpr int16_t kQs[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                      48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
  static constexpr int16_t kD[32] = {0, 0, 0, 0, 0, 0, 0, 0, 17, 17, 17, 17, 17, 17, 17, 17};

  struct Consts {
    __m512i qs = load_idx(kQs), d = load_idx(kD);
    __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  };
  static void from(const Consts& c, __m512i z0, __m512i z4, __m512i& w, __m512& dw) {
    w = _mm512_xor_si512(_mm512_permutex2var_epi16(z0, c.qs, z4), c.flip);
    dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(c.d, z0)));
  }
  static void load(const Consts& c, const uint8_t* p, __m512i& w, __m512& dw) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 36));
    w = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), c.flip);
    uint16_t d0, d1;
    std::memcpy(&d0, p, 2);
    std::memcpy(&d1, p + 34, 2);
    dw = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(d1)), _mm_set1_epi16(static_cast<short>(d0))));
  }
  // A lone last block: the missing second block's bytes read 0, flip to
  // 0x80 (times x = 0), scale 0.
  static void load_last(const Consts& c, const uint8_t* p, __m512i& w, __m512& dw) {
    from(c, _mm512_maskz_loadu_epi8((__mmask64{1} << 34) - 1, p), _mm512_maskz_loadu_epi8((__mmask64{1} << 30) - 1, p + 4),
         w, dw);
  }

  static void repack(const BlockQ8Act* x, int64_t n_blocks, PairAct* out) {
    for (int64_t p = 0; p < (n_blocks + 1) / 2; ++p) {
      PairAct& a = out[p];
      a = PairAct{};
      for (int h = 0; h < 2 && 2 * p + h < n_blocks; ++h) {
        const BlockQ8Act& b = x[2 * p + h];
        std::copy(b.qs, b.qs + 32, a.qs + 32 * h);
        a.off[8 * h] = -kShift * b.qsum;
        for (int i = 0; i < 8; ++i) a.dx[8 * h + i] = b.d;
      }
    }
  }
};

// One block pair of one weight row (w, dw) against T tokens' PairActs
// (stride apart), into acc[0..T).
template <int T>
inline void pair_step(__m512i w, __m512 dw, const PairAct* a, int64_t stride, __m512* acc) {
  for (int t = 0; t < T; ++t) {
    const PairAct& x = a[t * stride];
    const __m512i s = _mm512_dpbusd_epi32(_mm512_load_si512(x.off), w, _mm512_load_si512(x.qs));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_load_ps(x.dx)), acc[t]);
  }
}

// One weight row against T tokens from `a` (token stride n_pairs); even
// pairs into one set of accumulators, odd pairs into another, so two FMA
// chains run at once. y[t * ldy].
//
// One row at a time, not several interleaved: on the machine this was tuned
// on (Zen 5 VM) two or four concurrent row streams read DRAM at half the rate
// of one (measured, single thread, 32000 x 2048 Q4_0: 28 GB/s one row,
// 10 GB/s two rows), while one row's 3 activation loads per pair hit L1.
template <class W, int T>
void tile(const typename W::Consts& c, const uint8_t* row, int64_t n_blocks, const PairAct* a, int64_t n_pairs,
          float* y, int64_t ldy) {
  __m512 even[T], odd[T];
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  __m512i w;
  __m512 dw;
  const int64_t n_full = n_blocks / 2;
  int64_t p = 0;
  for (; p + 1 < n_full; p += 2) {
    const uint8_t* q = row + p * W::kPairBytes;
    W::load(c, q, w, dw);
    pair_step<T>(w, dw, a + p, n_pairs, even);
    W::load(c, q + W::kPairBytes, w, dw);
    pair_step<T>(w, dw, a + p + 1, n_pairs, odd);
  }
  if (p < n_full) {
    W::load(c, row + p * W::kPairBytes, w, dw);
    pair_step<T>(w, dw, a + p, n_pairs, even);
    ++p;
  }
  if (p < n_pairs) {  // odd n_blocks
    W::load_last(c, row + p * W::kPairBytes, w, dw);
    pair_step<T>(w, dw, a + p, n_pairs, p % 2 == 0 ? even : odd);
  }
  for (int t = 0; t < T; ++t) y[t * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(even[t], odd[t]));
}

template <class W>
void quant_rows512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
                   int64_t n_tokens, float* y, int64_t ldy) {
  const typename W::Consts c;
  const int64_t n_pairs = (n_blocks + 1) / 2;
  thread_local std::vector<PairAct> acts;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kChunk) {
    const int64_t nt = std::min(kChunk, n_tokens - t0);
    if (acts.size() < static_cast<size_t>(nt * n_pairs)) acts.resize(static_cast<size_t>(nt * n_pairs));
    for (int64_t t = 0; t < nt; ++t) W::repack(x + (t0 + t) * n_blocks, n_blocks, acts.data() + t * n_pairs);
    const PairAct* a = acts.data();
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float* yr = y + t0 * ldy + r;
      int64_t t = 0;
      for (; t + kTokens <= nt; t += kTokens) tile<W, kTokens>(c, row, n_blocks, a + t * n_pairs, n_pairs, yr + t * ldy, ldy);
      for (; t < nt; ++t) tile<W, 1>(c, row, n_blocks, a + t * n_pairs, n_pairs, yr + t * ldy, ldy);
    }
  }
}

}  // namespace

void gemm_q8_0_avx512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks,
                      const BlockQ8Act* x, int64_t n_tokens, float* y, int64_t ldy) {
  quant_rows512<Q8>(w, row_bytes, r0, r1, n_blocks, x, n_tokens, y, ldy);
}

void gemm_q4_0_avx512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks,
                      const BlockQ8Act* x, int64_t n_tokens, float* y, int64_t ldy) {
  quant_rows512<Q4>(w, row_bytes, r0, r1, n_blocks, x, n_tokens, y, ldy);
}

}  // namespace nexus
