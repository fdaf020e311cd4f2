// matmul() and matmul_shared_input(): pick the kernel table once, quantize
// activations for the integer kernels (once per input, split across the
// threads), and split weight rows across the pool's threads.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/f32_panels.h"
#include "kernels/weight_kernels.h"
#include "kernels/thread_pool.h"
#include "util/error.h"

namespace nexus {
namespace {

// The instruction sets matmul() runs, chosen once by CPUID (and
// NEXUS_KERNELS). Each weight type's kernel is then its table row's entry
// for that set, or the nearest one below it (weight_kernels.h).
struct IsaChoice {
  Isa decode = Isa::Ref;   // fewer than prefill_from tokens
  Isa prefill = Isa::Ref;  // prefill_from tokens or more (below large_from)
  // Where the prefill kernels start to pay: the AVX-512 prefill kernel's
  // 12-token tile beats the decode kernels from 8 tokens (bench_kernels;
  // 5632x2048 Q4_0 at 8 tokens: 0.21 vs 0.76 ms), which is what a batch of
  // 8 decoding sequences or a speculative verify run multiplies.
  int64_t prefill_from = 16;
  // AMX from this many tokens. Below 128 the AVX-512 prefill kernel is as
  // fast or faster on every AMX VM measured: 1.1B Q4_0, 2 threads, pp8 /
  // pp16 / pp32 / pp64 149 / 219 / 261 / 274 t/s against AMX's (and, at 8,
  // the decode kernel's) 101 / 164 / 217 / 245; Q8_0 107 / 171 / 232 / 254
  // against 82 / 111 / 182 / 223 (docs/benchmarks.md, 2026-12-06). At 128
  // they were even there; AMX led by 10-15% on the VM of 2026-12-02.
  Isa large = Isa::Ref;
  int64_t large_from = std::numeric_limits<int64_t>::max();
};

IsaChoice select_isa() {
  const char* env = std::getenv("NEXUS_KERNELS");
  const std::string want = env ? env : "";
  const bool avx2 = cpu_supports(Isa::Avx2), avx512 = cpu_supports(Isa::Avx512), amx = cpu_supports(Isa::Amx);
  if (want == "ref") return {Isa::Ref, Isa::Ref};
  if (want == "avx2" && avx2) return {Isa::Avx2, Isa::Avx2};
  if (want == "avx512_vnni" && avx512) return {Isa::Avx512, Isa::Avx512};
  const Isa vec = avx512 ? Isa::Avx512 : avx2 ? Isa::Avx2 : Isa::Ref;
  if (want == "avx512_prefill" && avx512) return {Isa::Avx512, Isa::Avx512Prefill, 8};
  if (want == "amx" && amx) return {vec, Isa::Amx, 16};
  if (amx) return {vec, Isa::Avx512Prefill, 8, Isa::Amx, 128};
  if (avx512) return {vec, Isa::Avx512Prefill, 8};
  return {vec, vec};
}

const IsaChoice& isas() {
  static const IsaChoice k = select_isa();
  return k;
}

Isa isa_for(int64_t n_tokens) {
  const IsaChoice& c = isas();
  return n_tokens >= c.large_from ? c.large : n_tokens >= c.prefill_from ? c.prefill : c.decode;
}

// The kernel row of a weight, or an error naming its type.
const TypeKernels& row_of(const WeightView& w) {
  const TypeKernels* k = type_kernels(w.type);
  if (!k) throw Error("matmul: unsupported weight type " + std::string(ggml_type_name(w.type)));
  return *k;
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

// Activations quantized once into `f` for n_tokens rows of n_cols, split
// across the threads for large inputs. Each token's blocks depend on that
// token only, so the split changes nothing. The buffer is reused across
// calls (per thread): no allocation per step once the largest batch was seen.
const void* quantize_acts(ActFormat f, const float* x, int64_t n_tokens, int64_t n_cols, ThreadPool& pool) {
  static const auto q8_32 = cpu_features().avx512_vnni ? quantize_act_q8_avx512 : quantize_act_q8;
  const size_t row_bytes = act_row_bytes(f, n_cols);
  thread_local std::vector<uint64_t> buf;  // 8-byte units: every block type is 4-byte aligned
  const size_t need = (row_bytes * static_cast<size_t>(n_tokens) + 7) / 8;
  if (buf.size() < need) buf.resize(need);
  auto* out = reinterpret_cast<uint8_t*>(buf.data());
  auto quantize = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint8_t* dst = out + static_cast<size_t>(t) * row_bytes;
      if (f == ActFormat::Q8_32) q8_32(x + t * n_cols, reinterpret_cast<BlockQ8Act*>(dst), n_cols);
      else quantize_act_q8k(x + t * n_cols, reinterpret_cast<BlockQ8K*>(dst), n_cols);
    }
  };
  if (n_tokens > 1 && n_tokens * n_cols >= kMinParallelQuant && pool.size() > 1) pool.parallel_for(n_tokens, quantize);
  else quantize(0, n_tokens);
  return out;
}

}  // namespace

Isa matmul_isa(GgmlType type, int64_t n_tokens) {
  const TypeKernels* k = type_kernels(type);
  return k ? picked_isa(*k, isa_for(n_tokens)) : Isa::Ref;
}

namespace {
using PanelFn = decltype(&gemm_f32_panels_avx512);  // both panel kernels share this signature

// The panel kernel of the decode table; nullptr for the reference table.
PanelFn panel_kernel() {
  static const PanelFn fn = isas().decode == Isa::Avx512 ? gemm_f32_panels_avx512
                            : isas().decode == Isa::Avx2 ? gemm_f32_panels_avx2
                                                         : nullptr;
  return fn;
}
}  // namespace

bool f32_panels_supported() { return panel_kernel() != nullptr; }

void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  const TypeKernels& k = row_of(w);
  if (k.act != ActFormat::F32) {
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
  const GemmFn fn = pick_gemm(k, isa_for(n_tokens));
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  auto rows = [&](int64_t r0, int64_t r1) { fn(wdata, w.row_bytes, r0, r1, n_cols, x, n_tokens, y, n_rows); };
  if (serial) rows(0, n_rows);
  else if (n_tokens >= isas().prefill_from) pool.parallel_for(n_rows, rows);
  else split_decode(pool, n_rows, rows);
}

void matmul_shared_input(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens, ThreadPool& pool) {
  if (outs.empty()) return;
  if (outs.size() > kMaxSharedOutputs) throw Error("matmul_shared_input: too many products");
  // Fused when every weight takes the same quantized activations of the
  // same length: x is quantized once for all of them.
  const int64_t n_cols = outs[0].w->n_cols;
  const ActFormat act = row_of(*outs[0].w).act;
  bool fused = act != ActFormat::F32;
  for (const MatmulOut& o : outs) fused = fused && row_of(*o.w).act == act && o.w->n_cols == n_cols;
  if (!fused) {
    for (const MatmulOut& o : outs) matmul(*o.w, x, o.y, n_tokens, pool);
    return;
  }
  const void* xq = quantize_acts(act, x, n_tokens, n_cols, pool);

  // The products' rows, in panels of kSplitRows, form one range that the
  // threads split: one fork/join for all, and a small product (K, V) does not
  // leave a thread idle on its own. unit0[i]: product i's first panel.
  std::array<int64_t, kMaxSharedOutputs + 1> unit0{};
  std::array<GemmFn, kMaxSharedOutputs> fns{};
  int64_t work = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    unit0[i + 1] = unit0[i] + (outs[i].w->n_rows + kSplitRows - 1) / kSplitRows;
    fns[i] = pick_gemm(row_of(*outs[i].w), isa_for(n_tokens));
    work += outs[i].w->n_rows * n_cols * n_tokens;
  }
  auto units = [&](int64_t u0, int64_t u1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const WeightView& w = *outs[i].w;
      const int64_t r0 = std::max<int64_t>(u0 - unit0[i], 0) * kSplitRows;
      const int64_t r1 = std::min<int64_t>((u1 - unit0[i]) * kSplitRows, w.n_rows);
      if (r0 >= r1) continue;
      fns[i](static_cast<const uint8_t*>(w.data), w.row_bytes, r0, r1, n_cols, xq, n_tokens, outs[i].y, w.n_rows);
    }
  };
  const int64_t n_units = unit0[outs.size()];
  if (work < kMinParallelWork || pool.size() == 1) units(0, n_units);
  else if (n_tokens >= isas().prefill_from) pool.parallel_for(n_units, units);
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
