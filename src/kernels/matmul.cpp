// Portable matrix kernels. Every output element is computed the same way
// (dequantize the weight row to float32, then one dot product), whatever the
// number of tokens or threads, so prefill, decode and any thread count give
// bit-identical results. The vectorised kernels of the CPU-kernel work replace
// this file behind the same interface.
#include "kernels/matmul.h"

#include <string>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/thread_pool.h"
#include "util/error.h"

namespace nexus {
namespace {

float dot_f32(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void check_supported(GgmlType type) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  if (!t || !t->supported)
    throw Error("matmul: unsupported weight type " + std::string(ggml_type_name(type)));
}

// Below this many multiply-adds a product runs on the calling thread: waking
// workers costs more than it saves.
constexpr int64_t kMinParallelWork = 1 << 15;

}  // namespace

float dot_row(GgmlType type, const void* row, const float* x, int64_t n) {
  if (type == GgmlType::F32) return dot_f32(static_cast<const float*>(row), x, n);
  std::vector<float> buf(static_cast<size_t>(n));
  dequantize_row(type, row, buf.data(), n);
  return dot_f32(buf.data(), x, n);
}

void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  check_supported(w.type);
  const int64_t n_rows = w.n_rows, n_cols = w.n_cols;
  auto rows = [&](int64_t r0, int64_t r1) {
    std::vector<float> buf;
    if (w.type != GgmlType::F32) buf.resize(static_cast<size_t>(n_cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* wr;
      if (w.type == GgmlType::F32) {
        wr = reinterpret_cast<const float*>(w.row(r));
      } else {
        dequantize_row(w.type, w.row(r), buf.data(), n_cols);
        wr = buf.data();
      }
      for (int64_t t = 0; t < n_tokens; ++t) y[t * n_rows + r] = dot_f32(wr, x + t * n_cols, n_cols);
    }
  };
  if (n_rows * n_cols * n_tokens < kMinParallelWork || pool.size() == 1) {
    rows(0, n_rows);
  } else {
    pool.parallel_for(n_rows, rows);
  }
}

}  // namespace nexus
