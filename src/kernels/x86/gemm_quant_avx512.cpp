// Q8_0 / Q4_0 weights against 8-bit activations with 512-bit VNNI
// (gemm_quant_avx512.h). Compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512dq -mavx512vnni (src/CMakeLists.txt).
//
// Each step covers a quad of blocks (4q .. 4q + 3) of one weight row against
// the tokens of one tile: all of them up to 8 (a speculative verify run: the
// row is unpacked once, not once per four tokens and once per token left
// over), else four at a time. The weight's 4 x 32 values go into two 512-bit
// registers, A = values 0..15 of the four blocks and B = values 16..31, so
// that int32 lanes 4k .. 4k + 3 of both belong to block k:
//   weight: Q4_0: four 16-byte loads of the nibbles, AND / shift+AND for the
//           low / high nibbles; Q8_0: four 32-byte loads, two 128-bit-lane
//           shuffles, XOR 0x80; the four fp16 scales spread to their lanes
//           and widened by one vcvtph2ps;
//   per token: two vpdpbusd into one int32 vector, vcvtdq2ps, vmulps (weight
//           scale x activation scale), vfmadd into that token's accumulator.
// The activations are repacked once per call (QuadAct) into that lane order:
// four aligned L1 loads per token and quad.
//
// vpdpbusd multiplies unsigned by signed bytes. Q4_0's nibbles are used as
// unsigned 0..15 and Q8_0's values are shifted to unsigned by XOR 0x80
// (+128). The offsets this adds, 8 * sum(x_q) and 128 * sum(x_q) per block,
// are removed by starting the vpdpbusd accumulator at -offset
// (BlockQ8Act::qsum): integer sums are exact, so this costs no instruction
// and changes no rounding.
//
// Measured on the 2-core Zen 5 VM this was written on (a direct loop over
// matmul(), one thread, CPU time, median; 32000 x 2048 weight from a file
// mapping, i.e. from DRAM): Q4_0 14.6 -> 34 GB/s, Q8_0 23-34 -> 38-40 GB/s
// against the 256-bit kernels of gemm_body.h. Q4_0 is still bound by the
// core here (~37 GB/s from L2; without the scale permute it would be 42),
// Q8_0 by DRAM (~49 GB/s from L2). Tried and slower: interleaving 2 or 4
// rows (DRAM read rate halved), 64-byte loads that straddle cache lines,
// vpermt2w (slow on Zen 5). Software prefetch (prefetch_distances): on the
// Intel Xeon VM decode +11% (Q8_0) / +27% (Q4_0) with the L1 prefetch alone,
// and +6% / +2% more from the L2 one; on the Zen 5 VM, where the distances
// tuned on Intel gained nothing, +9% / +15% with longer ones.
//
// Determinism: each (row, token) has its own accumulators and sees the same
// operations in the same order (even quads into one, odd quads into the
// other, then their sum and its lane reduction) whether it is computed in a
// 4-token or 1-token tile, in any token chunk, or any row range.
#include "kernels/x86/gemm_quant_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

// One quad of blocks of one token, in the kernels' lane order.
struct alignas(64) QuadAct {
  int8_t a[64];     // values 0..15 of blocks 0, 1, 2, 3
  int8_t b[64];     // values 16..31 of blocks 0, 1, 2, 3
  int32_t off[16];  // vpdpbusd start value: lane 4k = -(the unsigned shift) x qsum of block k
  float dx[16];     // activation scale of block k in lanes 4k .. 4k + 3
};
static_assert(sizeof(QuadAct) == 256);

constexpr int kTokens = 4;      // tokens per tile in a long run
constexpr int kMaxTile = 8;     // a run of up to this many tokens is one tile (16 accumulators)

// How far ahead of the loads the weight stream is prefetched into L1 (l1)
// and, further ahead, into L2 (l2). In decode the kernel is about as fast as
// DRAM, and without this the core computes and waits for DRAM in turn
// instead of at once. The best distances differ by CPU:
// - Intel Xeon (AMX) VM, synthetic TinyLlama-1.1B, 2 threads, tg64, L1 only
//   at 0 / 512 / 1024 / 1536 / 2048 / 2560 / 3072 / 4096 bytes (4 KiB pages):
//   Q4_0 36.0 / 40.2 / 43.1 / 45.7 / 45.6 / 44.2 / 44.1 / 41.7 t/s, Q8_0
//   22.2 / 23.5 / 24.4 / 24.7 / 24.6 / 23.9 / 21.1 / 19.4 t/s. Then, with
//   2 MiB pages (gguf_file.cpp), L1 2048 alone against L1 1024 + L2 3072,
//   three alternations: Q4_0 48.6, 48.3, 48.6 -> 49.4, 49.8, 49.4; Q8_0
//   26.7, 26.8, 26.9 -> 28.3, 28.7, 28.2 t/s (L2 at 4096 or 6144, or L1 at
//   512 / 768 / 1536, were not better). Non-temporal (NTA) halved the rate.
// - AMD EPYC Zen 5 VM, same model and test, `chrt -f 10`, two runs each
//   (L1 / L2 bytes): Q4_0 1024 / 3072: 58.9, 58.5, 61.7, 60.7; 2048 / 6144:
//   65.0, 64.2; 4096 / 8192: 63.3, 64.4; 1024 / 12288: 67.5, 62.6;
//   2048 / 12288: 69.4, 68.3, 72.7, 69.0; 2048 / 16384: 69.0, 67.7;
//   2048 / 24384: 69.0, 68.7. Q8_0 1024 / 3072: 36.7, 35.6; 2048 / 12288:
//   40.8, 38.5; 2048 / 8192: 40.3, 37.0.
// - Intel Xeon VM without AMX (AVX-512 FP16, 260 MiB L3; DRAM read 20-28
//   GB/s with 2 threads), same test, share of each run's DRAM bound in
//   four alternating rounds: Q4_0 1024 / 3072: 85.1, 84.6, 82.9, 85.4%;
//   2048 / 6144: 91.0, 90.9, 89.9, 95.9%; 2048 / 8192: 88.7, 88.7;
//   3072 / 8192: 88.2, 87.4; 2048 / 4096: 83.0, 87.2; 1024 / 8192: 90.6,
//   88.4; 2048 / 12288: 99.8, 86.5. Q8_0 1024 / 3072: 92.2, 78.8, 96.4%;
//   2048 / 6144: 105.9, 96.8, 100.6% (the bound moved within runs). On the
//   AMX VM L1 prefetches at 1024 to 2048 bytes were equal, and L2 at 6144
//   no worse than 3072, so Intel now takes 2048 / 6144.
struct PrefetchDistances {
  size_t l1, l2;
};
const PrefetchDistances& prefetch_distances() {
  static const PrefetchDistances d = cpu_features().amd ? PrefetchDistances{2048, 12288} : PrefetchDistances{2048, 6144};
  return d;
}
constexpr int64_t kChunk = 64;  // tokens repacked at a time (a 0.7 MB buffer at 5632 columns)

inline __m512i load_idx(const int16_t (&v)[32]) { return _mm512_loadu_si512(v); }

// x: n_blocks activation blocks -> ceil(n_blocks / 4) quads; missing blocks
// of the last quad are zeros (their products vanish).
void repack(const BlockQ8Act* x, int64_t n_blocks, int32_t shift, QuadAct* out) {
  for (int64_t q = 0; q < (n_blocks + 3) / 4; ++q) {
    QuadAct& a = out[q];
    a = QuadAct{};
    for (int k = 0; k < 4 && 4 * q + k < n_blocks; ++k) {
      const BlockQ8Act& b = x[4 * q + k];
      std::memcpy(a.a + 16 * k, b.qs, 16);
      std::memcpy(a.b + 16 * k, b.qs + 16, 16);
      a.off[4 * k] = -shift * b.qsum;
      for (int i = 0; i < 4; ++i) a.dx[4 * k + i] = b.d;
    }
  }
}

inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

inline __m128i bcast16(const uint8_t* p) {
  uint16_t d;
  std::memcpy(&d, p, 2);
  return _mm_set1_epi16(static_cast<short>(d));
}
// Four fp16 scales -> lanes 4k .. 4k + 3 = scale k.
inline __m512 scales_x4(const uint8_t* p0, const uint8_t* p1, const uint8_t* p2, const uint8_t* p3) {
  const __m128i h01 = _mm_unpacklo_epi64(bcast16(p0), bcast16(p1));
  const __m128i h23 = _mm_unpacklo_epi64(bcast16(p2), bcast16(p3));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(h01), h23, 1));
}

// Q4_0: quad = 72 bytes, block k at 18k: d (2), 16 bytes of nibbles (byte j:
// value j low, value j + 16 high).
struct Q4 {
  static constexpr size_t kBlockBytes = 18;
  static constexpr int32_t kShift = 8;
  // The scales are words 0, 9, 18, 27 of the quad's first 64 bytes.
  static constexpr int16_t kD[32] = {0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 27, 27, 27, 27};

  struct Consts {
    __m512i d = load_idx(kD);
    __m512i low4 = _mm512_set1_epi8(0x0f);
  };
  static void load(const Consts& c, const uint8_t* p, __m512i& wa, __m512i& wb, __m512& dw) {
    const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load16(p + 2)), load16(p + 20), 1);
    const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load16(p + 38)), load16(p + 56), 1);
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
    wa = _mm512_and_si512(q, c.low4);
    wb = _mm512_and_si512(_mm512_srli_epi16(q, 4), c.low4);
    // One 64-byte load + vpermw: here faster than scales_x4 (Q4_0 is compute-bound).
    dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(c.d, _mm512_loadu_si512(p))));
  }
};

// Q8_0: quad = 136 bytes, block k at 34k: d (2), 32 int8 values.
struct Q8 {
  static constexpr size_t kBlockBytes = 34;
  static constexpr int32_t kShift = 128;
  struct Consts {
    __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  };
  static void load(const Consts& c, const uint8_t* p, __m512i& wa, __m512i& wb, __m512& dw) {
    // 128-bit lanes: q01 = [0 lo, 0 hi, 1 lo, 1 hi], q23 = [2 lo, 2 hi, 3 lo, 3 hi].
    const __m512i q01 = _mm512_inserti64x4(_mm512_castsi256_si512(load32(p + 2)), load32(p + 36), 1);
    const __m512i q23 = _mm512_inserti64x4(_mm512_castsi256_si512(load32(p + 70)), load32(p + 104), 1);
    wa = _mm512_xor_si512(_mm512_shuffle_i64x2(q01, q23, _MM_SHUFFLE(2, 0, 2, 0)), c.flip);
    wb = _mm512_xor_si512(_mm512_shuffle_i64x2(q01, q23, _MM_SHUFFLE(3, 1, 3, 1)), c.flip);
    // Broadcasts, not two 64-byte loads + vpermt2w: those read DRAM ~10% slower here.
    dw = scales_x4(p, p + 34, p + 68, p + 102);
  }
};

// One quad of one weight row (wa, wb, dw) against T tokens' QuadActs
// (stride apart), into acc[0..T).
template <int T>
inline void quad_step(__m512i wa, __m512i wb, __m512 dw, const QuadAct* a, int64_t stride, __m512* acc) {
  for (int t = 0; t < T; ++t) {
    const QuadAct& x = a[t * stride];
    __m512i s = _mm512_dpbusd_epi32(_mm512_load_si512(x.off), wa, _mm512_load_si512(x.a));
    s = _mm512_dpbusd_epi32(s, wb, _mm512_load_si512(x.b));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_load_ps(x.dx)), acc[t]);
  }
}

// One weight row against T tokens from `a` (token stride n_quads); even
// quads into one set of accumulators, odd quads into another, so two FMA
// chains run at once. y[t * ldy].
//
// One row at a time, not several interleaved: on the machine this was tuned
// on (Zen 5 VM) two or four concurrent row streams read DRAM at half the rate
// of one (measured, single thread, 32000 x 2048 Q4_0: 28 GB/s one row,
// 10 GB/s two rows), and one row's activation loads hit L1.
template <class W, int T>
void tile(const typename W::Consts& c, const uint8_t* row, int64_t n_blocks, const QuadAct* a, int64_t n_quads,
          float* y, int64_t ldy) {
  constexpr size_t kQuadBytes = 4 * W::kBlockBytes;
  const size_t pf_l1 = prefetch_distances().l1, pf_l2 = prefetch_distances().l2;
  __m512 even[T], odd[T];
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  __m512i wa, wb;
  __m512 dw;
  const int64_t n_full = n_blocks / 4;
  int64_t q = 0;
  for (; q + 1 < n_full; q += 2) {
    const uint8_t* p = row + q * kQuadBytes;
    // Past the row's end this touches the next row (rows are contiguous) or
    // memory after the matrix: a prefetch never faults.
    const char* here = reinterpret_cast<const char*>(p);
    for (size_t i = 0; i < 2 * kQuadBytes; i += 64) {
      _mm_prefetch(here + pf_l2 + i, _MM_HINT_T1);
      _mm_prefetch(here + pf_l1 + i, _MM_HINT_T0);
    }
    W::load(c, p, wa, wb, dw);
    quad_step<T>(wa, wb, dw, a + q, n_quads, even);
    W::load(c, p + kQuadBytes, wa, wb, dw);
    quad_step<T>(wa, wb, dw, a + q + 1, n_quads, odd);
  }
  for (; q < n_quads; ++q) {
    if (q < n_full) {
      W::load(c, row + q * kQuadBytes, wa, wb, dw);
    } else {
      // The last 1..3 blocks, padded with zero blocks (scale 0, values 0).
      alignas(64) uint8_t pad[kQuadBytes + 64] = {};
      std::memcpy(pad, row + q * kQuadBytes, static_cast<size_t>(n_blocks - 4 * q) * W::kBlockBytes);
      W::load(c, pad, wa, wb, dw);
    }
    quad_step<T>(wa, wb, dw, a + q, n_quads, q % 2 == 0 ? even : odd);
  }
  for (int t = 0; t < T; ++t) y[t * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(even[t], odd[t]));
}

// tile<W, n> for n in [0, kMaxTile] (0: nothing).
template <class W>
void tile_n(int n, const typename W::Consts& c, const uint8_t* row, int64_t n_blocks, const QuadAct* a, int64_t n_quads,
            float* y, int64_t ldy) {
  switch (n) {
    case 0: return;
    case 1: return tile<W, 1>(c, row, n_blocks, a, n_quads, y, ldy);
    case 2: return tile<W, 2>(c, row, n_blocks, a, n_quads, y, ldy);
    case 3: return tile<W, 3>(c, row, n_blocks, a, n_quads, y, ldy);
    case 4: return tile<W, 4>(c, row, n_blocks, a, n_quads, y, ldy);
    case 5: return tile<W, 5>(c, row, n_blocks, a, n_quads, y, ldy);
    case 6: return tile<W, 6>(c, row, n_blocks, a, n_quads, y, ldy);
    case 7: return tile<W, 7>(c, row, n_blocks, a, n_quads, y, ldy);
    default: return tile<W, 8>(c, row, n_blocks, a, n_quads, y, ldy);
  }
}

template <class W>
void quant_rows512(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
                   int64_t n_tokens, float* y, int64_t ldy) {
  const typename W::Consts c;
  const int64_t n_quads = (n_blocks + 3) / 4;
  thread_local std::vector<QuadAct> acts;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kChunk) {
    const int64_t nt = std::min(kChunk, n_tokens - t0);
    if (acts.size() < static_cast<size_t>(nt * n_quads)) acts.resize(static_cast<size_t>(nt * n_quads));
    for (int64_t t = 0; t < nt; ++t) repack(x + (t0 + t) * n_blocks, n_blocks, W::kShift, acts.data() + t * n_quads);
    const QuadAct* a = acts.data();
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w + r * row_bytes;
      float* yr = y + t0 * ldy + r;
      // Up to kMaxTile tokens in one tile, so the row is unpacked once (a
      // speculative verify run of 2-8 tokens); more in tiles of kTokens,
      // the rest in one tile.
      int64_t t = 0;
      if (nt > kMaxTile)
        for (; t + kTokens <= nt; t += kTokens) tile<W, kTokens>(c, row, n_blocks, a + t * n_quads, n_quads, yr + t * ldy, ldy);
      tile_n<W>(static_cast<int>(nt - t), c, row, n_blocks, a + t * n_quads, n_quads, yr + t * ldy, ldy);
    }
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_q8_0_avx512) {
  quant_rows512<Q8>(w, row_bytes, r0, r1, n_cols / 32, static_cast<const BlockQ8Act*>(x), n_tokens, y, ldy);
}

NEXUS_GEMM_KERNEL(gemm_q4_0_avx512) {
  quant_rows512<Q4>(w, row_bytes, r0, r1, n_cols / 32, static_cast<const BlockQ8Act*>(x), n_tokens, y, ldy);
}

}  // namespace nexus
