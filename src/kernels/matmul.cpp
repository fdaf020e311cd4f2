// matmul(): picks the kernel table once, quantizes activations for the
// integer kernels, and splits weight rows across the pool's threads.
#include "kernels/matmul.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/f32_panels.h"
#include "kernels/gemm_kernels.h"
#include "kernels/thread_pool.h"
#include "util/error.h"

namespace nexus {
namespace {

struct KernelChoice {
  const GemmKernels* decode;   // few tokens
  const GemmKernels* prefill;  // kAmxMinTokens or more
};

KernelChoice select_kernels() {
  const CpuFeatures& cpu = cpu_features();
  const char* env = std::getenv("NEXUS_KERNELS");
  const std::string want = env ? env : "";
  const GemmKernels* ref = &gemm_kernels_ref();
  const GemmKernels* avx2 = cpu.avx2 ? gemm_kernels_avx2() : nullptr;
  const GemmKernels* avx512 = cpu.avx512_vnni ? gemm_kernels_avx512_vnni() : nullptr;
  const GemmKernels* amx = cpu.amx_int8 && avx512 ? gemm_kernels_amx() : nullptr;
  const GemmKernels* avx512_prefill = avx512 ? gemm_kernels_avx512_prefill() : nullptr;
  if (want == "ref") return {ref, ref};
  if (want == "avx2" && avx2) return {avx2, avx2};
  if (want == "avx512_vnni" && avx512) return {avx512, avx512};
  const GemmKernels* vec = avx512 ? avx512 : avx2 ? avx2 : ref;
  if (want == "avx512_prefill" && avx512_prefill) return {avx512, avx512_prefill};
  return {vec, amx ? amx : avx512_prefill ? avx512_prefill : vec};
}

const KernelChoice& kernels() {
  static const KernelChoice k = select_kernels();
  return k;
}

// Tokens from which a product goes to the prefill (AMX) kernels: a tile
// holds 16 tokens, below that the vector kernels waste less.
constexpr int64_t kAmxMinTokens = 16;

// Below this many multiply-adds a product runs on the calling thread: waking
// workers costs more than it saves.
constexpr int64_t kMinParallelWork = 1 << 18;

bool is_quantized(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

}  // namespace

const GemmKernels& gemm_kernels() { return *kernels().decode; }

bool f32_panels_supported() {
  static const bool yes = kernels().decode == gemm_kernels_avx512_vnni();
  return yes;
}

void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  const GemmKernels& k = n_tokens >= kAmxMinTokens ? *kernels().prefill : *kernels().decode;
  const int64_t n_rows = w.n_rows, n_cols = w.n_cols;
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes;
  const bool serial = n_rows * n_cols * n_tokens < kMinParallelWork || pool.size() == 1;
  auto split_rows = [&](const auto& rows) {
    if (serial) rows(int64_t{0}, n_rows);
    else pool.parallel_for(n_rows, rows);
  };

  if (is_quantized(w.type)) {
    // Reused across calls: no allocation per step once the largest batch was seen.
    thread_local std::vector<BlockQ8Act> xq;
    const int64_t n_blocks = n_cols / 32;
    if (xq.size() < static_cast<size_t>(n_tokens * n_blocks)) xq.resize(static_cast<size_t>(n_tokens * n_blocks));
    for (int64_t t = 0; t < n_tokens; ++t) quantize_act_q8(x + t * n_cols, xq.data() + t * n_blocks, n_cols);
    const GemmQ8Fn fn = w.type == GgmlType::Q8_0 ? k.q8_0 : k.q4_0;
    const BlockQ8Act* xqp = xq.data();
    split_rows([&](int64_t r0, int64_t r1) { fn(wdata, row_bytes, r0, r1, n_blocks, xqp, n_tokens, y, n_rows); });
    return;
  }
  if (w.panels) {
    const int64_t n_panels = (n_rows + kPanelRows - 1) / kPanelRows;
    auto panels = [&](int64_t p0, int64_t p1) {
      gemm_f32_panels_avx512(w.panels, p0, p1, n_rows, n_cols, x, n_tokens, y, n_rows);
    };
    if (serial) panels(0, n_panels);
    else pool.parallel_for(n_panels, panels);
    return;
  }
  GemmFFn fn = nullptr;
  switch (w.type) {
    case GgmlType::F32: fn = k.f32; break;
    case GgmlType::F16: fn = k.f16; break;
    case GgmlType::BF16: fn = k.bf16; break;
    default: throw Error("matmul: unsupported weight type " + std::string(ggml_type_name(w.type)));
  }
  split_rows([&](int64_t r0, int64_t r1) { fn(wdata, row_bytes, r0, r1, n_cols, x, n_tokens, y, n_rows); });
}

float dot_row(GgmlType type, const void* row, const float* x, int64_t n) {
  ThreadPool one(1);
  WeightView w{type, row, 1, n, ggml_row_size(type, static_cast<uint64_t>(n))};
  float y = 0.0f;
  matmul(w, x, &y, 1, one);
  return y;
}

}  // namespace nexus
