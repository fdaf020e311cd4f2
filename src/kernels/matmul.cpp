// matmul() and matmul_shared_input(): pick the kernel table once, quantize
// activations for the integer kernels (once per input, split across the
// threads), and split weight rows across the pool's threads.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
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
  const GemmKernels* decode;   // fewer than prefill_from tokens
  const GemmKernels* prefill;  // prefill_from tokens or more
  // Where the prefill table starts to pay: AMX tiles hold 16 tokens; the
  // AVX-512 prefill kernel's 12-token tile beats the decode kernels from 8
  // tokens (bench_kernels; 5632x2048 Q4_0 at 8 tokens: 0.21 vs 0.76 ms),
  // which is what a batch of 8 decoding sequences multiplies.
  int64_t prefill_from = 16;
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
  if (want == "avx512_prefill" && avx512_prefill) return {avx512, avx512_prefill, 8};
  if (amx) return {vec, amx, 16};
  if (avx512_prefill) return {vec, avx512_prefill, 8};
  return {vec, vec};
}

const KernelChoice& kernels() {
  static const KernelChoice k = select_kernels();
  return k;
}

// Below this many multiply-adds a product runs on the calling thread: waking
// workers costs more than it saves.
constexpr int64_t kMinParallelWork = 1 << 18;

// Threads split quantized products in panels of this many rows (the prefill
// kernels' tile height), so no thread packs a partial panel mid-weight.
constexpr int64_t kSplitRows = 16;

// Decode products (one to a few tokens, bound by reading the weights) run in
// pieces of about 1/kPiecesPerRange of a thread's range, and a thread that
// is done takes pieces from the other's (ThreadPool::parallel_for_stealing):
// a core slowed for a moment no longer holds the step back. Each thread still
// streams its own range front to back. Quantized prefill products keep one
// range per thread: their kernels pack weight panels and activations per
// call. F32 weights repacked into panels at load pack nothing per call, so
// they take pieces at every batch size.
constexpr int64_t kPiecesPerRange = 16;

template <class Fn>
void split_decode(ThreadPool& pool, int64_t n_units, Fn&& fn) {
  pool.parallel_for_stealing(n_units, std::max<int64_t>(1, n_units / (kPiecesPerRange * pool.size())), fn);
}

// From this many activation values, quantizing them is split across threads.
constexpr int64_t kMinParallelQuant = 1 << 15;

bool is_quantized(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

}  // namespace

const GemmKernels& gemm_kernels() { return *kernels().decode; }

namespace {
using PanelFn = decltype(&gemm_f32_panels_avx512);  // both panel kernels share this signature

// The panel kernel of the decode table; nullptr for the reference table.
PanelFn panel_kernel() {
  static const PanelFn fn = kernels().decode == gemm_kernels_avx512_vnni() ? gemm_f32_panels_avx512
                            : kernels().decode == gemm_kernels_avx2()      ? gemm_f32_panels_avx2
                                                                           : nullptr;
  return fn;
}
}  // namespace

bool f32_panels_supported() { return panel_kernel() != nullptr; }

void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  if (is_quantized(w.type)) {
    const MatmulOut one{&w, y};
    matmul_shared_input(std::span(&one, 1), x, n_tokens, pool);
    return;
  }
  const int64_t n_rows = w.n_rows, n_cols = w.n_cols;
  const bool serial = n_rows * n_cols * n_tokens < kMinParallelWork || pool.size() == 1;
  if (w.panels) {
    const int64_t n_panels = (n_rows + kPanelRows - 1) / kPanelRows;
    auto panels = [&](int64_t p0, int64_t p1) {
      panel_kernel()(w.panels, p0, p1, n_rows, n_cols, x, n_tokens, y, n_rows);
    };
    if (serial) panels(0, n_panels);
    else split_decode(pool, n_panels, panels);
    return;
  }
  const GemmKernels& k = n_tokens >= kernels().prefill_from ? *kernels().prefill : *kernels().decode;
  GemmFFn fn = nullptr;
  switch (w.type) {
    case GgmlType::F32: fn = k.f32; break;
    case GgmlType::F16: fn = k.f16; break;
    case GgmlType::BF16: fn = k.bf16; break;
    default: throw Error("matmul: unsupported weight type " + std::string(ggml_type_name(w.type)));
  }
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  auto rows = [&](int64_t r0, int64_t r1) { fn(wdata, w.row_bytes, r0, r1, n_cols, x, n_tokens, y, n_rows); };
  if (serial) rows(0, n_rows);
  else if (n_tokens >= kernels().prefill_from) pool.parallel_for(n_rows, rows);
  else split_decode(pool, n_rows, rows);
}

void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool) {
  if (outs.empty()) return;
  if (outs.size() > kMaxSharedOutputs) throw Error("matmul_shared_input: too many products");
  const int64_t n_cols = outs[0].w->n_cols;
  bool fused = true;
  for (const MatmulOut& o : outs) fused = fused && is_quantized(o.w->type) && o.w->n_cols == n_cols;
  if (!fused) {
    for (const MatmulOut& o : outs) matmul(*o.w, x, o.y, n_tokens, pool);
    return;
  }
  const GemmKernels& k = n_tokens >= kernels().prefill_from ? *kernels().prefill : *kernels().decode;
  const int64_t n_blocks = n_cols / 32;
  static const auto quantize_row = cpu_features().avx512_vnni ? quantize_act_q8_avx512 : quantize_act_q8;

  // Quantized once for every product. Reused across calls: no allocation per
  // step once the largest batch was seen. Each token's blocks depend on that
  // token only, so splitting the tokens across threads changes nothing.
  thread_local std::vector<BlockQ8Act> xq;
  if (xq.size() < static_cast<size_t>(n_tokens * n_blocks)) xq.resize(static_cast<size_t>(n_tokens * n_blocks));
  BlockQ8Act* xqw = xq.data();
  auto quantize = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) quantize_row(x + t * n_cols, xqw + t * n_blocks, n_cols);
  };
  if (n_tokens > 1 && n_tokens * n_cols >= kMinParallelQuant && pool.size() > 1) pool.parallel_for(n_tokens, quantize);
  else quantize(0, n_tokens);

  // The products' rows, in panels of kSplitRows, form one range that the
  // threads split: one fork/join for all, and a small product (K, V) does not
  // leave a thread idle on its own. unit0[i]: product i's first panel.
  std::array<int64_t, kMaxSharedOutputs + 1> unit0{};
  int64_t work = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    unit0[i + 1] = unit0[i] + (outs[i].w->n_rows + kSplitRows - 1) / kSplitRows;
    work += outs[i].w->n_rows * n_cols * n_tokens;
  }
  const BlockQ8Act* xqp = xq.data();
  auto units = [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const WeightView& w = *outs[i].w;
      const int64_t r0 = std::max<int64_t>(u0 - unit0[i], 0) * kSplitRows;
      const int64_t r1 = std::min<int64_t>((u1 - unit0[i]) * kSplitRows, w.n_rows);
      if (r0 >= r1) continue;
      const GemmQ8Fn fn = w.type == GgmlType::Q8_0 ? k.q8_0 : k.q4_0;
      fn(static_cast<const uint8_t*>(w.data), w.row_bytes, r0, r1, n_blocks, xqp, n_tokens, outs[i].y, w.n_rows);
    }
  };
  const int64_t n_units = unit0[outs.size()];
  if (work < kMinParallelWork || pool.size() == 1) units(0, n_units);
  else if (n_tokens >= kernels().prefill_from) pool.parallel_for(n_units, units);
  else split_decode(pool, n_units, units);
}

float dot_row(GgmlType type, const void* row, const float* x, int64_t n) {
  ThreadPool one(1);
  WeightView w{type, row, 1, n, ggml_row_size(type, static_cast<uint64_t>(n))};
  float y = 0.0f;
  matmul(w, x, &y, 1, one);
  return y;
}

}  // namespace nexus
