// Scaled dot-product attention of one query head over a run of cached keys,
// with an online softmax (Milakov & Gimelshein 2018, as in FlashAttention):
// keys are visited in chunks of kAttnChunk positions, the running maximum and
// normaliser are rescaled per chunk, and no score vector over the whole
// context is ever materialised.
//
//   out = sum_p softmax_p(scale * q . k_p) v_p,  p < n_keys
//
// q, out: [head_dim] float32. k, v: n_keys rows of a cache laid out
// [position, kv_stride] row-major; the caller points them at this head's KV
// head (GQA: query heads of a group share those rows, nothing is copied).
// head_dim <= kMaxHeadDim; n_keys >= 1.
//
// Paged variants (Kwon et al. 2023, "Efficient Memory Management for LLM
// Serving with PagedAttention"): the cache is a pool of blocks of block_size
// positions and a sequence's positions are spread over the blocks of its
// block table: position p is row p % block_size of block block_table[p /
// block_size]. block_size must be a multiple of kAttnChunk, so every chunk
// of the online softmax lies inside one block and the paged result is bit
// for bit the contiguous one (same chunks, same operations).
#pragma once

#include <cstdint>
#include <span>

namespace nexus {

constexpr int32_t kAttnChunk = 16;
constexpr int32_t kMaxHeadDim = 256;

void attention_head(const float* q, const float* k, const float* v, int64_t kv_stride, int32_t n_keys,
                    int32_t head_dim, float scale, float* out);

// Where one KV head's keys and values sit in a paged cache. Units are
// elements (float or fp16), not bytes:
//   K row of position p = k + block_table[p / block_size] * block_stride
//                           + (p % block_size) * kv_stride     (same for v)
// k, v point at this head's first value in block 0 (block id 0, row 0).
// block_table holds at least ceil(n_keys / block_size) valid block ids.
struct PagedKv {
  const void* k = nullptr;
  const void* v = nullptr;
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;     // positions per block, a multiple of kAttnChunk
  int64_t block_stride = 0;   // elements from one block to the next
  int64_t kv_stride = 0;      // elements from one position to the next
  // Q8_0 only: the arena's scales (one fp16 per 32 elements, see
  // model/kv_cache.h) and the arena element offsets k and v point at.
  const uint16_t* scales = nullptr;
  int64_t k_elem0 = 0, v_elem0 = 0;
};

// How a paged cache stores K/V: float32, IEEE fp16, or Q8_0 (int8 values,
// one fp16 scale per 32 elements in PagedKv::scales).
enum class KvElem { F32, F16, Q8_0 };

// K/V stored as float32.
void attention_head_paged(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, float scale,
                          float* out);

// K/V stored as IEEE fp16 (uint16_t): each chunk is widened to float32
// (exactly) before the same arithmetic as above.
void attention_head_paged_f16(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, float scale,
                              float* out);

// K/V stored as Q8_0 (int8 values at the element offsets, fp16 scales in
// kv.scales): each chunk is dequantized to float32 (q * d, exact in float)
// before the same arithmetic as above.
void attention_head_paged_q8(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, float scale,
                             float* out);

// Many query rows against one KV head, each K/V chunk read once for all of
// them: the prefill kernel. A row is one query head of one token; the rows
// of a call are typically a tile of a prefill run's consecutive tokens times
// the query heads of one GQA group, so each chunk of 16 positions is widened
// to float32 once (fp16 / Q8_0) and then stays in L1 while every row folds
// it into its own online softmax. The per-head kernels above stream the
// whole context once per row instead: at 7,000 cached positions, a
// tinyllama-1.1b turn ran its attention at about 27 GFLOP/s that way
// (docs/benchmarks.md, "Prefill at depth").
//
// Each row attends to positions [0, n_keys) (causal rows of a run differ in
// n_keys) and its result has the bits of attention_head_paged /
// attention_head_paged_f16 / attention_head_paged_q8 for that row: the same
// chunks, the same arithmetic (test_attention). So a token's attention does
// not depend on what else shares its tile, and prefill and decode agree.
// q, out: [head_dim] float32 per row; out may not alias another row's q.
// 1 <= n_keys; head_dim <= kMaxHeadDim; kv as for the paged kernels.
struct AttnRow {
  const float* q = nullptr;
  float* out = nullptr;
  int32_t n_keys = 0;
};
void attention_rows_paged(std::span<const AttnRow> rows, const PagedKv& kv, KvElem elem, int32_t head_dim,
                          float scale);

// Eight query heads of one token at head_dim 4 or 8 (tiny models such as
// TinyLLama-v0 and stories260K), with the heads in the vector lanes of the
// online softmax: one pass over the keys serves all eight, where the per-head
// kernels above spend a horizontal sum, a maximum and an exponential per key
// and head, and at head_dim 8 a single dependent chain of FMAs per chunk.
// q, out: [8 heads][head_dim] float32 (query heads h0 .. h0 + 7). kv points
// at KV head h0 / group; query head h0 + i reads KV head (h0 + i) / group, so
// group (query heads per KV head, GQA) must divide 8 and h0 be a multiple of
// 8. head_dim must be 4 or 8. Each head's result has the bits of
// attention_head_paged (float32 K/V) / attention_head_paged_f16 (fp16 K/V)
// for that head: the same operations in the same order (test_attention).
void attention_heads8_paged(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, int32_t group,
                            float scale, float* out);
void attention_heads8_paged_f16(const float* q, const PagedKv& kv, int32_t n_keys, int32_t head_dim, int32_t group,
                                float scale, float* out);

// Sixteen query heads of one token at head_dim 4 without GQA (each query
// head reads the KV head of its own index), in the lanes of 512-bit
// registers: half the instructions per head of attention_heads8_paged.
// q, out: [16 heads][4] float32 (query heads h0 .. h0 + 15); kv points at
// KV head h0. Each head's result has the bits of attention_head_paged /
// attention_head_paged_f16 for that head (test_attention). Only when
// attention_heads16_hd4_supported(): AVX-512 (F, DQ) on this CPU.
bool attention_heads16_hd4_supported();
void attention_heads16_hd4_paged(const float* q, const PagedKv& kv, int32_t n_keys, float scale, float* out);
void attention_heads16_hd4_paged_f16(const float* q, const PagedKv& kv, int32_t n_keys, float scale, float* out);

}  // namespace nexus
