// `nexus bench-model`: prefill / decode throughput of a model, llama-bench
// style (src/model/bench_model.h).
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/open_model.h"
#include "cli/run_cuda.h"
#include "gguf/gguf_file.h"
#include "model/bench_model.h"
#include "model/kv_cache.h"
#include "model/llama_config.h"
#include "util/error.h"

#ifdef NEXUS_HAVE_CUDA
#include "model/cuda/cuda_bench.h"
#endif

namespace nexus::cli {
namespace {

struct BenchArgs {
  std::string model;
  std::vector<int32_t> n_prompt = {128, 512};
  std::vector<int32_t> n_gen = {128};
  int32_t threads = 0, reps = 3, bw_runs = 5, depth = 0;
  std::string kv_type = "f32";
  int64_t bw_mib = 1024;
  bool json = false, quiet = false;
  std::string device = "cpu";
  std::vector<int32_t> batch = {1, 8, 32};
  int32_t gpu_layers = -1;
};

// Each test against the model's context, as bench_model() checks it, but
// as a usage error that names the option.
void check_test_sizes(const BenchArgs& a, const GgufFile& gguf) {
  const int32_t ctx = LlamaConfig::from_gguf(gguf).n_ctx_train;
  if (a.depth > 0 && a.depth >= ctx)
    throw UsageError(fmt::format("--depth: {} leaves no room for a test in the model's context of {} tokens", a.depth, ctx));
  const std::string at = a.depth > 0 ? fmt::format(" at --depth {}", a.depth) : "";
  for (int32_t n : a.n_prompt)
    if (n > 0 && a.depth + n > ctx)
      throw UsageError(fmt::format("--n-prompt: {}{} exceeds the model's context of {} tokens", n, at, ctx));
  for (int32_t n : a.n_gen)
    if (n > 0 && a.depth + n + 1 > ctx)
      throw UsageError(fmt::format("--n-gen: {}{} needs {} positions; the model's context is {} tokens", n, at,
                                   a.depth + n + 1, ctx));
}

int run_bench(const BenchArgs& a) {
  if (a.device == "cuda") {
    if (a.json) throw UsageError("--json: not supported with --device cuda yet");
    if (a.depth > 0) throw UsageError("--depth: not supported with --device cuda yet");
    if (kv_type_from_name(a.kv_type) != KvType::F32) throw UsageError("--kv-type: not supported with --device cuda yet");
    require_cuda_device();
#ifdef NEXUS_HAVE_CUDA
    const std::string path = model_file(a.model, "bench-model --device cuda");
    check_test_sizes(a, GgufFile(path));
    CudaBenchOptions co;
    co.n_prompt = a.n_prompt;
    co.n_gen = a.n_gen;
    co.batch = a.batch;
    co.gpu_layers = a.gpu_layers;
    co.reps = a.reps;
    const std::string out = cuda_bench_markdown(path, co);
    std::fputs(out.c_str(), stdout);
    return 0;
#endif
  }
  BenchModelOptions opt;
  opt.n_prompt = a.n_prompt;
  opt.n_gen = a.n_gen;
  opt.n_threads = a.threads;
  opt.depth = a.depth;
  opt.kv_type = *kv_type_from_name(a.kv_type);
  opt.reps = a.reps;
  opt.bandwidth_bytes = static_cast<uint64_t>(a.bw_mib) << 20;
  opt.bandwidth_runs = a.bw_runs;
  if (!a.quiet) opt.log = [](const std::string& s) { std::fprintf(stderr, "bench-model: %s\n", s.c_str()); };
  const OpenedModel m = open_model(a.model);
  check_test_sizes(a, *m.gguf);
  const BenchModelReport r = bench_model(*m.gguf, m.id, opt);
  const std::string out = a.json ? bench_model_json(r) : bench_model_markdown(r);
  std::fputs(out.c_str(), stdout);
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<BenchArgs>();
  sub.add_option("-m,--model", a->model, kModelHelp)->check(model_path());
  sub.add_option("-p,--n-prompt", a->n_prompt, "prefill tests, comma-separated token counts (0: none)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(range(0, 1 << 20));
  sub.add_option("-n,--n-gen", a->n_gen, "decode tests, comma-separated token counts (0: none)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(range(0, 1 << 20));
  sub.add_option("-d,--depth", a->depth,
                 "positions already in the KV cache before each test (prefilled once, untimed), as llama-bench's -d")
      ->capture_default_str()
      ->check(range(0, 1 << 24));
  sub.add_option("--kv-type", a->kv_type,
                 "KV cache storage: f32 (as the reference checks), f16 (the server's default) or q8_0; any case")
      ->capture_default_str()
      ->check(kv_type_name());
  sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->capture_default_str()->check(range(0, 4096));
  sub.add_option("-r,--repetitions", a->reps, "timed repetitions of each test (a prefill test also runs once untimed first)")
      ->capture_default_str()
      ->check(range(1, 1000000));
  sub.add_option("--bw-mib", a->bw_mib,
                 "buffer for the DRAM bandwidth run in MiB, raised to 4x the last-level cache when that is larger "
                 "(0: skip it)")
      ->capture_default_str()
      ->check(range(int64_t{0}, int64_t{1} << 20));
  sub.add_option("--bw-runs", a->bw_runs, "bandwidth runs (the best is kept)")
      ->capture_default_str()
      ->check(range(1, 1000000));
  sub.add_option("--device", a->device, "cpu, or cuda (docs/cuda.md)")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  sub.add_option("-b,--batch", a->batch, "with --device cuda: decode batch sizes, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(range(1, 4096));
  sub.add_option("--gpu-layers", a->gpu_layers, "with --device cuda: layers on the GPU; -1 = all")->capture_default_str();
  sub.add_flag("--json", a->json, "print JSON instead of markdown");
  sub.add_flag("-q,--quiet", a->quiet, "no progress lines on stderr");
  return [a] { return run_bench(*a); };
}

CommandRegistrar reg{{"bench-model", "measure prefill and decode tokens/s of a model (llama-bench style)", setup}};

}  // namespace
}  // namespace nexus::cli
