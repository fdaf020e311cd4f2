// Attention of one token's sixteen query heads over a paged fp16 KV cache, at
// the head sizes of tiny models (4: TinyLLama-v0, group 1; 8: stories260K,
// group 2; GQA group = query heads per KV head): sixteen calls of the
// per-head kernel, two of the eight-head kernel, or one of the sixteen-head
// kernel (AVX-512, head size 4 without GQA); all give the same bits.
// items_per_second counts (head, key) pairs, so the rows of a shape compare
// directly.
//
// BM_prefill_tile: the prefill kernel against the per-head one (below).
//
//   build/release/bench/bench_attention
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/quant_blocks.h"

namespace {

constexpr int32_t kHeads = 16, kBlock = 16;

struct Cache {
  std::vector<uint16_t> data;  // per block: K rows then V rows, [kBlock][stride]
  std::vector<int32_t> table;
  int32_t stride = 0;  // elements per cached position: all KV heads
  nexus::PagedKv kv(int32_t head_off) const {
    const int64_t block_stride = 2 * static_cast<int64_t>(kBlock) * stride;
    return nexus::PagedKv{data.data() + head_off, data.data() + head_off + kBlock * stride, table.data(), kBlock,
                          block_stride, stride};
  }
};

Cache make_cache(int32_t head_dim, int32_t group, int32_t n_keys) {
  Cache c;
  c.stride = head_dim * kHeads / group;
  const int32_t n_blocks = (n_keys + kBlock - 1) / kBlock;
  c.table.resize(static_cast<size_t>(n_blocks));
  std::iota(c.table.begin(), c.table.end(), 0);
  std::mt19937 rng(7);
  std::shuffle(c.table.begin(), c.table.end(), rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  c.data.resize(static_cast<size_t>(n_blocks) * 2 * kBlock * c.stride);
  for (uint16_t& x : c.data) x = nexus::fp32_to_fp16(nd(rng));
  return c;
}

enum class Kernel { PerHead, EightHeads, SixteenHeads };

void BM_attention(benchmark::State& state, Kernel kernel) {
  const auto head_dim = static_cast<int32_t>(state.range(0)), group = static_cast<int32_t>(state.range(1));
  const auto n_keys = static_cast<int32_t>(state.range(2));
  if (kernel == Kernel::SixteenHeads && (head_dim != 4 || group != 1 || !nexus::attention_heads16_hd4_supported())) {
    state.SkipWithError("the sixteen-head kernel takes head size 4 without GQA, on AVX-512");
    return;
  }
  const Cache cache = make_cache(head_dim, group, n_keys);
  std::vector<float> q(static_cast<size_t>(kHeads * head_dim), 0.3f), out(q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (auto _ : state) {
    switch (kernel) {
      case Kernel::SixteenHeads:
        nexus::attention_heads16_hd4_paged_f16(q.data(), cache.kv(0), n_keys, scale, out.data());
        break;
      case Kernel::EightHeads:
        for (int32_t h = 0; h < kHeads; h += 8)
          nexus::attention_heads8_paged_f16(&q[h * head_dim], cache.kv(h / group * head_dim), n_keys, head_dim, group,
                                            scale, &out[h * head_dim]);
        break;
      case Kernel::PerHead:
        for (int32_t h = 0; h < kHeads; ++h)
          nexus::attention_head_paged_f16(&q[h * head_dim], cache.kv(h / group * head_dim), n_keys, head_dim, scale,
                                          &out[h * head_dim]);
        break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kHeads * n_keys);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"head_dim", "group", "keys"});
  for (int64_t hd : {4, 8})
    for (int64_t group : {1, 2})
      for (int64_t keys : {64, 512}) b->Args({hd, group, keys});
}

void sixteen_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"head_dim", "group", "keys"});
  for (int64_t keys : {64, 512}) b->Args({4, 1, keys});
}

// One prefill tile at depth: 64 rows (64 / group consecutive tokens times the
// group's query heads, one KV head) over `keys` cached positions, as the
// per-head kernel (each row streams the whole context) and as
// attention_rows_paged (each K/V chunk widened once, then read from L1 by all
// 64 rows); the same bits. FLOP counts 2 multiply-adds per (row, key, dim).
void BM_prefill_tile(benchmark::State& state, bool rows_kernel) {
  const auto head_dim = static_cast<int32_t>(state.range(0)), group = static_cast<int32_t>(state.range(1));
  const auto n_keys = static_cast<int32_t>(state.range(2));
  constexpr int32_t kRows = 64;
  const Cache cache = make_cache(head_dim, group, n_keys);
  const nexus::PagedKv kv = cache.kv(0);
  std::vector<float> q(static_cast<size_t>(kRows * head_dim), 0.3f), out(q.size());
  std::vector<nexus::AttnRow> rows;
  for (int32_t r = 0; r < kRows; ++r)  // the tile's last tokens: n_keys - 64 / group + 1 .. n_keys keys
    rows.push_back({&q[r * head_dim], &out[r * head_dim], n_keys - (kRows / group - 1 - r / group)});
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (auto _ : state) {
    if (rows_kernel) nexus::attention_rows_paged(rows, kv, nexus::KvElem::F16, head_dim, scale);
    else
      for (const nexus::AttnRow& r : rows) nexus::attention_head_paged_f16(r.q, kv, r.n_keys, head_dim, scale, r.out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["FLOP"] =
      benchmark::Counter(4.0 * head_dim * kRows * n_keys * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void tile_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"head_dim", "group", "keys"});
  for (int64_t keys : {512, 8192}) b->Args({64, 8, keys});  // tinyllama-1.1b
  b->Args({128, 4, 8192});                                   // llama-3-8b, qwen2.5-7b
}

BENCHMARK_CAPTURE(BM_prefill_tile, per_head, false)->Apply(tile_shapes);
BENCHMARK_CAPTURE(BM_prefill_tile, rows, true)->Apply(tile_shapes);

BENCHMARK_CAPTURE(BM_attention, per_head, Kernel::PerHead)->Apply(shapes);
BENCHMARK_CAPTURE(BM_attention, eight_heads, Kernel::EightHeads)->Apply(shapes);
BENCHMARK_CAPTURE(BM_attention, sixteen_heads, Kernel::SixteenHeads)->Apply(sixteen_shapes);

}  // namespace

BENCHMARK_MAIN();
