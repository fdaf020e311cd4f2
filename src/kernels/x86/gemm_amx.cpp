// AMX-INT8 kernels for prefill (many tokens): Q8_0 / Q4_0 weights times
// 8-bit activations on the tile unit (Intel SDM vol. 1 ch. 20, TDPBSSD).
//
// One TDPBSSD per 32-value block: C[16 rows x 16 tokens] (int32) =
// A[16 weight rows x 32 int8] . B[32 x 16 tokens, VNNI layout]. Each block has
// its own scales, so C is scaled (dw[row] * dx[token]) into float
// accumulators after every block, exactly like the vector kernels do per
// block. Weight rows load straight from the GGUF mapping as the A tile (Q8_0)
// or after unpacking nibbles to int8 (Q4_0); activations are packed once per
// call into B tiles. A last panel of fewer than 16 rows is zero-padded (not
// sent to another kernel), so a row's result does not depend on the row
// range a thread was given.
//
// Compiled with -mamx-tile -mamx-int8 -mavx512f... (src/CMakeLists.txt);
// called only when cpu_features().amx_int8 (the OS granted tile state).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/x86/gemm_amx.h"
#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

constexpr int kRows = 16;    // weight rows per tile
constexpr int kTokens = 16;  // tokens per tile

// Lines of the next weight panel prefetched per block pair (see amx_rows).
// Issued all at once after gather_rows instead, they made it slower.
constexpr int kPrefetchLinesPerPair = 2;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Two tile sets, so one block's product runs while the other's result is
// stored and scaled: tmm0/tmm3: A (16 x 32 bytes), tmm1/tmm4: B (8 x 64
// bytes), tmm2/tmm5: C (16 x 64 bytes).
void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig cfg;
  for (int set = 0; set < 2; ++set) {
    cfg.rows[3 * set + 0] = kRows, cfg.colsb[3 * set + 0] = 32;
    cfg.rows[3 * set + 1] = 8, cfg.colsb[3 * set + 1] = 64;
    cfg.rows[3 * set + 2] = kRows, cfg.colsb[3 * set + 2] = 64;
  }
  _tile_loadconfig(&cfg);
  configured = true;
}

// acc[m] += (dx . dw[m]) * c[m] for the 16 rows of one block's C tile.
inline void scale_into(const int32_t (*c)[kTokens], const float* dw, __m512 dx, __m512* acc) {
  for (int m = 0; m < kRows; ++m) {
    const __m512 s = _mm512_mul_ps(dx, _mm512_set1_ps(dw[m]));
    acc[m] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_load_si512(c[m])), acc[m]);
  }
}

// Activations of one 16-token tile, per block: B tile (dword r of token n at
// row r, column n) and the 16 scales. Tokens past n_tokens are zero.
struct PackedActs {
  std::vector<int8_t> b;   // [n_tiles][n_blocks][8][64]
  std::vector<float> d;    // [n_tiles][n_blocks][16]
};

void pack_acts(const BlockQ8Act* x, int64_t n_tokens, int64_t n_blocks, PackedActs& p) {
  const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
  p.b.assign(static_cast<size_t>(n_tiles * n_blocks * 512), 0);
  p.d.assign(static_cast<size_t>(n_tiles * n_blocks * kTokens), 0.0f);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t tile = t / kTokens, n = t % kTokens;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const BlockQ8Act& xb = x[t * n_blocks + b];
      int8_t* dst = &p.b[static_cast<size_t>((tile * n_blocks + b) * 512)];
      for (int r = 0; r < 8; ++r) std::memcpy(dst + r * 64 + n * 4, xb.qs + r * 4, 4);
      p.d[static_cast<size_t>((tile * n_blocks + b) * kTokens + n)] = xb.d;
    }
  }
}

// n_rows (<= 16) weight rows as int8 blocks: a[b][row][32], with their
// scales dw[b][row]; rows n_rows..15 are zero.
template <class Block>
void gather_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int n_rows, int64_t n_blocks, std::vector<int8_t>& a,
                 std::vector<float>& dw) {
  a.resize(static_cast<size_t>(n_blocks * kRows * 32));
  dw.resize(static_cast<size_t>(n_blocks * kRows));
  if (n_rows < kRows) {  // zero rows: their C rows are zero and never stored
    std::fill(a.begin(), a.end(), int8_t{0});
    std::fill(dw.begin(), dw.end(), 0.0f);
  }
  for (int m = 0; m < n_rows; ++m) {
    const auto* wb = reinterpret_cast<const Block*>(w + (r0 + m) * row_bytes);
    for (int64_t b = 0; b < n_blocks; ++b) {
      int8_t* dst = &a[static_cast<size_t>((b * kRows + m) * 32)];
      dw[static_cast<size_t>(b * kRows + m)] = _cvtsh_ss(wb[b].d);
      if constexpr (sizeof(Block) == sizeof(BlockQ8_0)) {
        std::memcpy(dst, wb[b].qs, 32);
      } else {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[b].qs));
        const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_sub_epi8(_mm_and_si128(raw, low4), eight));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16),
                         _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), low4), eight));
      }
    }
  }
}

template <class Block>
void amx_rows(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_blocks, const BlockQ8Act* x,
              int64_t n_tokens, float* y, int64_t ldy) {
  if (r1 > r0) {
    configure_tiles();
    thread_local PackedActs acts;
    thread_local std::vector<int8_t> a;
    thread_local std::vector<float> dw;
    pack_acts(x, n_tokens, n_blocks, acts);
    const int64_t n_tiles = (n_tokens + kTokens - 1) / kTokens;
    // C tiles go to memory one pair of blocks ahead of their scaling: the
    // next pair's products run on the tile unit while the vector units scale
    // the previous pair, and the loads never wait on a just-issued tile store.
    alignas(64) int32_t c[2][2][kRows][kTokens];
    for (int64_t row0 = r0; row0 < r1; row0 += kRows) {
      const int n_rows = static_cast<int>(std::min<int64_t>(kRows, r1 - row0));
      gather_rows<Block>(w, row_bytes, row0, n_rows, n_blocks, a, dw);
      const int8_t* A = a.data();
      const float* DW = dw.data();
      // The next panel's rows (contiguous in the mapping) are prefetched a
      // few lines per block pair, spread over this panel's products.
      const int64_t next_rows = std::clamp<int64_t>(r1 - row0 - kRows, 0, kRows);
      const int64_t next_lines = next_rows * static_cast<int64_t>(row_bytes) / 64;
      const char* next = next_rows > 0 ? reinterpret_cast<const char*>(w + (row0 + kRows) * row_bytes) : nullptr;
      int64_t line = 0;
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const int8_t* B = &acts.b[static_cast<size_t>(tile * n_blocks * 512)];
        const float* DX = &acts.d[static_cast<size_t>(tile * n_blocks * kTokens)];
        __m512 acc[kRows];
        for (auto& v : acc) v = _mm512_setzero_ps();
        // Scales blocks b .. b + n - 1 (n = 1 or 2), stored in c[(b / 2) % 2].
        auto scale_pair = [&](int64_t b, int64_t n) {
          for (int64_t k = 0; k < n; ++k)
            scale_into(c[(b / 2) % 2][k], DW + (b + k) * kRows, _mm512_loadu_ps(DX + (b + k) * kTokens), acc);
        };
        int64_t b = 0;
        for (; b + 1 < n_blocks; b += 2) {
          _tile_zero(2);
          _tile_zero(5);
          _tile_loadd(0, A + b * kRows * 32, 32);
          _tile_loadd(1, B + b * 512, 64);
          _tile_dpbssd(2, 0, 1);
          _tile_loadd(3, A + (b + 1) * kRows * 32, 32);
          _tile_loadd(4, B + (b + 1) * 512, 64);
          _tile_dpbssd(5, 3, 4);
          if (b >= 2) scale_pair(b - 2, 2);
          for (int k = 0; k < kPrefetchLinesPerPair && line < next_lines; ++k, ++line)
            _mm_prefetch(next + 64 * line, _MM_HINT_T0);
          _tile_stored(2, c[(b / 2) % 2][0], 64);
          _tile_stored(5, c[(b / 2) % 2][1], 64);
        }
        if (b >= 2) scale_pair(b - 2, 2);
        if (b < n_blocks) {
          _tile_zero(2);
          _tile_loadd(0, A + b * kRows * 32, 32);
          _tile_loadd(1, B + b * 512, 64);
          _tile_dpbssd(2, 0, 1);
          _tile_stored(2, c[(b / 2) % 2][0], 64);
          scale_pair(b, 1);
        }
        alignas(64) float out[kTokens];
        for (int m = 0; m < n_rows; ++m) {
          _mm512_store_ps(out, acc[m]);
          for (int n = 0; n < kTokens && tile * kTokens + n < n_tokens; ++n)
            y[(tile * kTokens + n) * ldy + row0 + m] = out[n];
        }
      }
    }
  }
}

}  // namespace

NEXUS_GEMM_KERNEL(gemm_q8_0_amx) {
  amx_rows<BlockQ8_0>(w, row_bytes, r0, r1, n_cols / 32, static_cast<const BlockQ8Act*>(x), n_tokens, y, ldy);
}

NEXUS_GEMM_KERNEL(gemm_q4_0_amx) {
  amx_rows<BlockQ4_0>(w, row_bytes, r0, r1, n_cols / 32, static_cast<const BlockQ8Act*>(x), n_tokens, y, ldy);
}

}  // namespace nexus
