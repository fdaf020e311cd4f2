#include "model/cuda/cuda_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "gguf/gguf_file.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda_device.h"
#include "model/cuda/cuda_forward.h"
#include "model/llama_model.h"

namespace nexus {

double cuda_copy_bandwidth(size_t bytes, int runs) {
  cuda::DeviceBuffer<uint8_t> a(bytes), b(bytes);
  CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  double best = 0;
  for (int r = 0; r < runs + 1; ++r) {  // the first run warms up
    CUDA_CHECK(cudaEventRecord(e0));
    CUDA_CHECK(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0 && ms > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  return best;
}

std::string cuda_bench_markdown(const std::string& path, const CudaBenchOptions& opt) {
  using Clock = std::chrono::steady_clock;
  const CudaDeviceInfo dev = cuda_device_info();  // throws without a device
  GgufFile gguf(path);
  LlamaModel model(gguf);
  const LlamaConfig& c = model.config();
  int32_t max_batch = 1, max_ctx = 1;
  for (int32_t b : opt.batch) max_batch = std::max(max_batch, b);
  for (int32_t p : opt.n_prompt) max_ctx = std::max(max_ctx, p + 1);
  for (int32_t g : opt.n_gen) max_ctx = std::max(max_ctx, g + 2);
  CudaForwardOptions fo;
  fo.gpu_layers = opt.gpu_layers;
  fo.max_seqs = max_batch;
  fo.max_tokens = std::max(512, max_batch);
  fo.max_ctx = std::min(max_ctx, c.n_ctx_train);
  CudaForward fwd(model, fo);
  const double bw = cuda_copy_bandwidth(size_t{1} << 30, 5);
  const double wbytes = static_cast<double>(model.weight_bytes());
  std::string out = fmt::format(
      "device: {}\nmodel: {} ({} layers, {}/{} on the GPU), weights read per step {:.1f} MiB, device weights {:.1f} "
      "MiB, KV arena {:.1f} MiB\nHBM copy bandwidth (D2D memcpy, read+write): {:.1f} GB/s\n\n"
      "| test | batch | t/s (mean) | t/s (min..max) | share of HBM bound |\n|---|---:|---:|---:|---:|\n",
      cuda_device_summary(dev), c.name, c.n_layer, fwd.gpu_layers(), c.n_layer, wbytes / (1 << 20),
      static_cast<double>(fwd.device_weight_bytes()) / (1 << 20), static_cast<double>(fwd.device_kv_bytes()) / (1 << 20),
      bw / 1e9);
  const int32_t bps = fwd.max_blocks_per_seq();
  auto table = [&](int32_t seq) {
    std::vector<int32_t> t(static_cast<size_t>(bps));
    std::iota(t.begin(), t.end(), seq * bps);
    return t;
  };
  auto row = [&](const std::string& test, int32_t batch, const std::vector<double>& tps, double bound) {
    const double mean = std::accumulate(tps.begin(), tps.end(), 0.0) / static_cast<double>(tps.size());
    const auto [mn, mx] = std::minmax_element(tps.begin(), tps.end());
    out += fmt::format("| {} | {} | {:.1f} | {:.1f}..{:.1f} | {} |\n", test, batch, mean, *mn, *mx,
                       bound > 0 ? fmt::format("{:.0f}%", 100.0 * mean / bound) : std::string("-"));
  };

  for (int32_t np : opt.n_prompt) {
    if (np <= 0) continue;
    std::vector<int32_t> prompt(static_cast<size_t>(np));
    for (int32_t i = 0; i < np; ++i) prompt[static_cast<size_t>(i)] = 1 + (i * 7919) % (c.n_vocab - 1);
    const std::vector<int32_t> bt = table(0);
    std::vector<double> tps;
    for (int32_t r = 0; r < opt.reps + 1; ++r) {  // rep 0 warms up (cuBLAS heuristics, caches)
      const auto t0 = Clock::now();
      for (int32_t p = 0; p < np; p += fo.max_tokens) {
        const int32_t len = std::min(fo.max_tokens, np - p);
        std::vector<SeqRun> run = {{std::span(prompt.data() + p, static_cast<size_t>(len)), p, bt, p + len == np}};
        fwd.forward_greedy(run);
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0) tps.push_back(np / s);
    }
    row("pp" + std::to_string(np), 1, tps, 0);
  }
  for (int32_t ng : opt.n_gen) {
    if (ng <= 0) continue;
    for (int32_t B : opt.batch) {
      if (B <= 0) continue;
      std::vector<std::vector<int32_t>> bts;
      for (int32_t s = 0; s < B; ++s) bts.push_back(table(s));
      std::vector<double> tps;
      for (int32_t r = 0; r < opt.reps + 1; ++r) {  // rep 0 also captures the bucket's graph
        std::vector<int32_t> tok(static_cast<size_t>(B), 1);
        std::vector<SeqRun> runs(static_cast<size_t>(B));
        for (int32_t s = 0; s < B; ++s) runs[static_cast<size_t>(s)] = {std::span(&tok[static_cast<size_t>(s)], 1), 0, bts[static_cast<size_t>(s)], true};
        std::span<const int32_t> ids = fwd.decode_greedy(runs);  // the 1-token prompt, not timed
        const auto t0 = Clock::now();
        for (int32_t step = 0; step < ng; ++step) {
          std::copy(ids.begin(), ids.end(), tok.begin());
          for (auto& run : runs) run.n_past = step + 1;
          ids = fwd.decode_greedy(runs);
        }
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (r > 0) tps.push_back(static_cast<double>(B) * ng / s);
      }
      row("tg" + std::to_string(ng), B, tps, fwd.gpu_layers() == c.n_layer && bw > 0 ? B * bw / wbytes : 0);
    }
  }
  out += fmt::format("\ngraphs captured: {}; bound = batch * copy bandwidth / weight bytes read per step (KV reads ignored)\n",
                     fwd.graphs_captured());
  return out;
}

}  // namespace nexus
