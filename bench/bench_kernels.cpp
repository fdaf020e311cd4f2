// Matrix-product kernels per weight type, at the shapes of a 1B model's
// projections: 2048x2048 (attention q/o), 5632x2048 (TinyLlama FFN gate/up) and
// 2048x5632 (FFN down),
// for decode (1 token) and prefill (128 tokens), on 1 and 2 threads; and
// quantized decode on a 32000x2048 weight that only DRAM holds; and short
// quantized prefills (4 to 32 tokens).
//
// bytes_per_second counts the weight bytes read per product (the decode
// bound); FLOP/s counts 2 * rows * cols * tokens per product. Times are wall
// clock (the pool's workers do the work, not only the calling thread).
//
//   build/release/bench/bench_kernels --benchmark_filter='Q4_0.*tokens:1/'
#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/f32_panels.h"
#include "kernels/matmul.h"
#include "kernels/tensor.h"
#include "kernels/thread_pool.h"
#include "model/quantize_ref.h"

namespace {

using nexus::GgmlType;

// A random [rows, cols] weight stored as `type` (std 1/sqrt(cols), like a
// trained projection), built once per shape and type.
const std::vector<uint8_t>& weight_data(GgmlType type, int64_t rows, int64_t cols) {
  static std::map<std::tuple<GgmlType, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto& data = cache[{type, rows, cols}];
  if (data.empty()) {
    const size_t row_bytes = nexus::ggml_row_size(type, static_cast<uint64_t>(cols));
    data.resize(row_bytes * static_cast<size_t>(rows));
    std::mt19937 rng(1234);
    std::normal_distribution<float> nd(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = nd(rng);
      nexus::quantize_row_ref(type, row.data(), data.data() + static_cast<size_t>(r) * row_bytes, cols);
    }
  }
  return data;
}

void BM_matmul(benchmark::State& state, GgmlType type) {
  const int64_t rows = state.range(0), cols = state.range(1), n_tokens = state.range(2);
  const int32_t n_threads = static_cast<int32_t>(state.range(3));
  const std::vector<uint8_t>& data = weight_data(type, rows, cols);
  nexus::WeightView w;
  w.type = type;
  w.data = data.data();
  w.n_rows = rows;
  w.n_cols = cols;
  w.row_bytes = nexus::ggml_row_size(type, static_cast<uint64_t>(cols));
  const auto panels = nexus::pack_f32_panels(w);  // as LlamaModel does for F32
  w.panels = panels.get();

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * cols)), y(static_cast<size_t>(n_tokens * rows));
  for (float& v : x) v = ud(rng);
  nexus::ThreadPool pool(n_threads);

  for (auto _ : state) {
    nexus::matmul(w, x.data(), y.data(), n_tokens, pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(data.size()));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * cols * n_tokens),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "tokens", "threads"});
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}})
    for (int64_t tokens : {1, 128})
      for (int64_t threads : {1, 2}) b->Args({rows, cols, tokens, threads});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

// TinyLLama-v0's output layer (32000 rows of 64): the rows so short that the
// per-product reduction, not the weight stream, used to bound the batch. The
// 2000-row weight stays in L2: when its 8-token rate per thread matches the
// 32000-row one, the product is bound by the FMAs, not by reading L3.
void small_rows(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "tokens", "threads"});
  for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8})
    for (int64_t threads : {1, 2}) b->Args({32000, 64, tokens, threads});
  for (int64_t tokens : {1, 8}) b->Args({2000, 64, tokens, 1});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_matmul, F32, GgmlType::F32)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, F32_small_rows, GgmlType::F32)->Apply(small_rows);
BENCHMARK_CAPTURE(BM_matmul, F16, GgmlType::F16)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, BF16, GgmlType::BF16)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, Q8_0, GgmlType::Q8_0)->Apply(shapes);
BENCHMARK_CAPTURE(BM_matmul, Q4_0, GgmlType::Q4_0)->Apply(shapes);

// Decode from DRAM: a 32000 x 2048 weight (the output projection of a 1B
// model; 36 MB Q4_0, 70 MB Q8_0) does not fit in the caches, so
// bytes_per_second is the kernel's streaming rate against the DRAM bound.
void dram_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "tokens", "threads"});
  for (int64_t threads : {1, 2}) b->Args({32000, 2048, 1, threads});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(BM_matmul, Q8_0_dram, GgmlType::Q8_0)->Apply(dram_shapes);
BENCHMARK_CAPTURE(BM_matmul, Q4_0_dram, GgmlType::Q4_0)->Apply(dram_shapes);

// Short prefill: a chat turn's new input (a few to a few dozen tokens), where
// the prefill kernels' per-call packing and partial token tiles weigh most.
// One thread, the FFN gate/up shape, in cache.
void short_prefill(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "tokens", "threads"});
  for (int64_t tokens : {4, 8, 12, 13, 16, 20, 24, 32}) b->Args({5632, 2048, tokens, 1});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(BM_matmul, Q8_0_short, GgmlType::Q8_0)->Apply(short_prefill);
BENCHMARK_CAPTURE(BM_matmul, Q4_0_short, GgmlType::Q4_0)->Apply(short_prefill);

}  // namespace

BENCHMARK_MAIN();
