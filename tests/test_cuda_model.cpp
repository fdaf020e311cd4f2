// CudaForward against the CPU (label `cuda`; skips without a GPU):
//   - logits of a mixed prefill/decode batch vs BatchForward (same F16 KV
//     rounding; the GPU sums in another order and widens quantized weights
//     instead of quantizing activations, so agreement is to ~1e-3 of the
//     logit range for F32 weights, ~2e-2 for Q4_0/Q8_0),
//   - CUDA-graph replay == eager execution, bit for bit (same kernels, and
//     every kernel's per-token result is independent of the padding rows),
//   - --gpu-layers split (CPU tail) vs all layers on the GPU,
//   - the shared greedy references (../shared/models/reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda_device.h"
#include "support/test_support.h"
#include "util/error.h"

#ifdef NEXUS_HAVE_CUDA
#include "gguf/gguf_file.h"
#include "model/batch_forward.h"
#include "model/cuda/cuda_forward.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#endif

using namespace nexus;

#define NEXUS_REQUIRE_CUDA()                                                \
  do {                                                                      \
    std::string why_;                                                       \
    if (!cuda_available(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

#ifndef NEXUS_HAVE_CUDA
TEST(CudaModel, NotBuilt) { GTEST_SKIP() << kNoCudaBuildMessage; }
#else

namespace {

struct Loaded {
  explicit Loaded(const std::string& path) : gguf(path), model(gguf) {}
  GgufFile gguf;
  LlamaModel model;
};

// max |a - b| relative to the range of b.
double rel_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0, range = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
    range = std::max(range, static_cast<double>(std::fabs(b[i])));
  }
  return d / range;
}

int32_t argmax(std::span<const float> v) { return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

void compare_with_batch_forward(const std::string& path, double tol, int32_t gpu_layers) {
  Loaded m(path);
  const int32_t n_blocks = 16, bs = 16;
  KvCache cache(m.model.config(), n_blocks, bs, KvType::F16);
  BatchForward bf(m.model, cache, 2);
  CudaForwardOptions opt;
  opt.gpu_layers = gpu_layers;
  opt.max_seqs = 4;
  opt.max_tokens = 64;
  opt.max_ctx = 128;
  opt.n_blocks = n_blocks;
  opt.block_size = bs;
  CudaForward gpu(m.model, opt);

  std::vector<int32_t> a(40), b = {1, 50, 60};
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>((i * 37 + 1) % 200);
  const std::vector<int32_t> bt_a = {0, 1, 2, 3}, bt_b = {9, 10};
  std::vector<SeqRun> runs = {{a, 0, bt_a, true}, {b, 0, bt_b, true}};  // 43 tokens: the cuBLAS path
  std::span<const float> cpu = bf.forward(runs);
  std::vector<float> cpu_copy(cpu.begin(), cpu.end());
  std::span<const float> g = gpu.forward(runs);
  ASSERT_EQ(g.size(), cpu_copy.size());
  EXPECT_LT(rel_diff(g, cpu_copy), tol) << path << " prefill";

  for (int step = 0; step < 4; ++step) {  // decode steps: the matvec path
    const std::vector<int32_t> ta = {static_cast<int32_t>(100 + step)}, tb = {static_cast<int32_t>(7 + step)};
    std::vector<SeqRun> d = {{ta, 40 + step, bt_a, true}, {tb, 3 + step, bt_b, true}};
    cpu = bf.forward(d);
    cpu_copy.assign(cpu.begin(), cpu.end());
    g = gpu.forward(d);
    EXPECT_LT(rel_diff(g, cpu_copy), tol) << path << " decode step " << step;
  }
}

}  // namespace

TEST(CudaModel, MatchesBatchForwardF32) {
  NEXUS_REQUIRE_CUDA();
  NEXUS_REQUIRE_SHARED(path, "TinyLLama-v0.F32.gguf");
  compare_with_batch_forward(path, 1e-3, -1);
}

TEST(CudaModel, MatchesBatchForwardQuantized) {
  NEXUS_REQUIRE_CUDA();
  NEXUS_REQUIRE_SHARED(q8, "TinyLLama-v0.Q8_0.gguf");
  NEXUS_REQUIRE_SHARED(q4, "TinyLLama-v0.Q4_0.gguf");
  compare_with_batch_forward(q8, 2e-2, -1);
  compare_with_batch_forward(q4, 2e-2, -1);
}

TEST(CudaModel, GpuLayersSplitMatchesCpu) {
  NEXUS_REQUIRE_CUDA();
  NEXUS_REQUIRE_SHARED(path, "TinyLLama-v0.F32.gguf");
  compare_with_batch_forward(path, 1e-3, 2);  // layers 2.. and the output head on the CPU
}

TEST(CudaModel, GraphReplayEqualsEager) {
  NEXUS_REQUIRE_CUDA();
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  Loaded m(path);
  CudaForwardOptions opt;
  opt.max_seqs = 8;
  opt.max_tokens = 64;
  opt.max_ctx = 64;
  opt.n_blocks = 32;
  CudaForwardOptions eager_opt = opt;
  eager_opt.graphs = false;
  CudaForward graph(m.model, opt), eager(m.model, eager_opt);
  ASSERT_TRUE(graph.graphs_enabled());
  ASSERT_FALSE(eager.graphs_enabled());

  // Three sequences (bucket 4: one padding row), prefilled eagerly in both.
  std::vector<std::vector<int32_t>> seqs = {{1, 10, 20}, {1, 300}, {1, 5, 6, 7, 8}};
  std::vector<std::vector<int32_t>> bts = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};
  std::vector<SeqRun> pre;
  for (size_t i = 0; i < seqs.size(); ++i) pre.push_back({seqs[i], 0, bts[i], true});
  const std::span<const int32_t> first = graph.forward_greedy(pre);
  std::vector<int32_t> next(first.begin(), first.end());
  const std::span<const int32_t> next_eager = eager.forward_greedy(pre);
  ASSERT_EQ(next, std::vector<int32_t>(next_eager.begin(), next_eager.end()));

  for (int step = 0; step < 6; ++step) {
    std::vector<int32_t> tok(next);
    std::vector<SeqRun> d;
    for (size_t i = 0; i < seqs.size(); ++i) d.push_back({std::span(&tok[i], 1), static_cast<int32_t>(seqs[i].size()), bts[i], true});
    const std::span<const int32_t> g = graph.decode_greedy(d);
    std::vector<int32_t> g_ids(g.begin(), g.end());
    const std::span<const int32_t> e = eager.decode_greedy(d);
    ASSERT_EQ(g_ids, std::vector<int32_t>(e.begin(), e.end())) << "step " << step;
    const std::vector<float> gl = graph.last_logits(3), el = eager.last_logits(3);
    ASSERT_EQ(0, std::memcmp(gl.data(), el.data(), gl.size() * sizeof(float))) << "step " << step;
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].push_back(tok[i]);
    next = g_ids;
  }
  EXPECT_EQ(graph.graphs_captured(), 1);  // bucket 4, captured once, replayed 5 times
}

TEST(CudaModel, RejectsBadBatches) {
  NEXUS_REQUIRE_CUDA();
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  Loaded m(path);
  CudaForwardOptions opt;
  opt.max_seqs = 2;
  opt.max_tokens = 8;
  opt.max_ctx = 32;
  opt.n_blocks = 4;
  CudaForward gpu(m.model, opt);
  const std::vector<int32_t> t = {1, 2}, bad = {-1}, many(9, 1), bt = {0, 1}, bt_out = {7, 1};
  EXPECT_THROW(gpu.forward(std::vector<SeqRun>{}), Error);
  EXPECT_THROW(gpu.forward(std::vector<SeqRun>{{bad, 0, bt, true}}), Error);
  EXPECT_THROW(gpu.forward(std::vector<SeqRun>{{many, 0, bt, true}}), Error);  // > max_tokens
  EXPECT_THROW(gpu.forward(std::vector<SeqRun>{{t, 0, bt_out, true}}), Error);  // block 7 of 4
  EXPECT_THROW(gpu.forward(std::vector<SeqRun>{{t, 31, bt, true}}), Error);     // past max_ctx
  EXPECT_THROW(gpu.decode_greedy(std::vector<SeqRun>{{t, 0, bt, true}}), Error);  // 2 tokens in a decode step
}

TEST(CudaModel, SharedGreedyReferences) {
  NEXUS_REQUIRE_CUDA();
  for (const char* name : {"TinyLLama-v0.F32__Once_upon_a_time.json", "stories260K__Once_upon_a_time.json",
                           "TinyLLama-v0.Q4_0__Once_upon_a_time.json"}) {
    NEXUS_REQUIRE_SHARED(ref_path, std::string("reference/") + name);
    std::ifstream in(ref_path);
    const nlohmann::json j = nlohmann::json::parse(in);
    NEXUS_REQUIRE_SHARED(model_path, j.at("model").get<std::string>());
    Loaded m(model_path);
    const auto prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
    const auto want = j.at("greedy_ids").get<std::vector<int32_t>>();
    const bool quantized = std::string(name).find("Q4_0") != std::string::npos;
    CudaForwardOptions opt;
    opt.max_seqs = 1;
    opt.max_tokens = 64;
    opt.max_ctx = 256;
    CudaForward gpu(m.model, opt);
    std::vector<int32_t> bt(static_cast<size_t>(gpu.max_blocks_per_seq()));
    std::iota(bt.begin(), bt.end(), 0);
    std::vector<SeqRun> run = {{prompt, 0, bt, true}};
    std::span<const float> logits = gpu.forward(run);
    // First-step top-5 logits within 1e-2 relative (the shared README's bound for quantized models).
    for (const auto& e : j.at("first_step_top5_logits")) {
      const float ref = e[1].get<float>(), got = logits[e[0].get<int32_t>()];
      EXPECT_NEAR(got, ref, 1e-2 * std::fabs(ref) + 1e-3) << name;
    }
    std::vector<int32_t> out = {argmax(logits)};
    int32_t n_past = static_cast<int32_t>(prompt.size());
    while (out.size() < want.size()) {
      std::vector<SeqRun> d = {{std::span(&out.back(), 1), n_past++, bt, true}};
      out.push_back(gpu.decode_greedy(d)[0]);
    }
    // F32: summation order alone cannot flip 48 greedy steps of these models
    // unless two logits nearly tie, so demand a long common prefix (16);
    // Q4_0 rounds differently from the reference (no 8-bit activations): 8.
    const size_t need = std::min<size_t>(want.size(), quantized ? 8 : 16);
    for (size_t i = 0; i < need; ++i) ASSERT_EQ(out[i], want[i]) << name << " token " << i;
  }
}

#endif  // NEXUS_HAVE_CUDA
