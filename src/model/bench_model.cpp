#include "model/bench_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "util/error.h"
#include "util/mem_bandwidth.h"

namespace nexus {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Deterministic token ids spread over the vocabulary (the weights are read
// the same whatever the ids; varied ids avoid one cached embedding row).
std::vector<int32_t> bench_tokens(int32_t n, int32_t n_vocab, uint32_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint32_t x = 2463534242u ^ salt;
  for (int32_t& id : ids) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;  // xorshift32
    id = static_cast<int32_t>(x % static_cast<uint32_t>(n_vocab));
  }
  return ids;
}

}  // namespace

void set_mean_and_stddev(BenchModelRow& row) {
  double sum = 0;
  for (double v : row.tps) sum += v;
  row.mean = sum / static_cast<double>(row.tps.size());
  double ss = 0;
  for (double v : row.tps) ss += (v - row.mean) * (v - row.mean);
  row.stddev = row.tps.size() > 1 ? std::sqrt(ss / static_cast<double>(row.tps.size() - 1)) : 0.0;
}

void set_bound(BenchModelRow& row, std::vector<double> bound_tps_reps) {
  if (bound_tps_reps.size() != row.tps.size())
    throw Error(fmt::format("bench-model: {} bounds for {} repetitions", bound_tps_reps.size(), row.tps.size()));
  double bound = 0, share = 0;
  for (size_t i = 0; i < row.tps.size(); ++i) {
    if (!(bound_tps_reps[i] > 0)) throw Error("bench-model: a bound must be positive");
    bound += bound_tps_reps[i];
    share += row.tps[i] / bound_tps_reps[i];
  }
  const double n = static_cast<double>(row.tps.size());
  row.bound_tps = row.tps.empty() ? 0 : bound / n;
  row.percent_of_bound = row.tps.empty() ? 0 : 100.0 * share / n;
  row.bound_tps_reps = std::move(bound_tps_reps);
}

namespace {

std::string human_size(uint64_t bytes) {
  return bytes >= (uint64_t{1} << 30) ? fmt::format("{:.2f} GiB", bytes / 1073741824.0)
                                      : fmt::format("{:.2f} MiB", bytes / 1048576.0);
}

std::string human_count(uint64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{:.2f} K", n / 1e3);
}

}  // namespace

BenchModelReport bench_model(const std::string& path, const BenchModelOptions& opt) {
  const GgufFile gguf(path);
  return bench_model(gguf, std::filesystem::path(path).stem().string(), opt);
}

BenchModelReport bench_model(const GgufFile& gguf, const std::string& id, const BenchModelOptions& opt) {
  if (opt.reps < 1) throw Error("bench-model: repetitions must be >= 1");
  auto log = [&](const std::string& s) {
    if (opt.log) opt.log(s);
  };
  const LlamaModel model(gguf);
  const LlamaConfig& c = model.config();

  BenchModelReport r;
  // general.name, unless it only repeats the architecture (stories260K says "llama").
  r.model = c.name.empty() || c.name == c.arch ? id : c.name;
  r.path = gguf.path();
  r.type = std::string(ggml_type_name(model.layers().front().wq.type));
  for (const TensorInfo& t : gguf.tensors()) {
    r.size_bytes += t.n_bytes;
    r.n_params += t.n_elements();
  }
  r.weight_bytes_per_token = model.weight_bytes();
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);  // glibc; 0 or -1 when unknown
  r.llc_bytes = llc > 0 ? static_cast<uint64_t>(llc) : 0;
#endif
  r.n_threads = opt.n_threads > 0 ? opt.n_threads : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));

  r.depth = opt.depth;
  r.kv_type = kv_type_name(opt.kv_type);
  if (opt.depth < 0) throw Error("bench-model: the depth must not be negative");
  if (opt.depth > 0 && opt.depth >= c.n_ctx_train)
    throw Error(fmt::format("bench-model: a depth of {} leaves no room in the model's context of {}", opt.depth,
                            c.n_ctx_train));
  for (int32_t n : opt.n_prompt)
    if (n > 0 && opt.depth + n > c.n_ctx_train)
      throw Error(fmt::format("bench-model: pp{} at depth {} exceeds the model's context of {}", n, opt.depth,
                              c.n_ctx_train));
  for (int32_t n : opt.n_gen)
    if (n > 0 && opt.depth + n + 1 > c.n_ctx_train)
      throw Error(fmt::format("bench-model: tg{} at depth {} needs {} positions; the model's context is {}", n,
                              opt.depth, opt.depth + n + 1, c.n_ctx_train));

  // Kept for the whole run: each decode repetition is bounded by readings
  // taken just before and just after it.
  std::optional<ReadBandwidthProbe> probe;
  if (opt.bandwidth_bytes > 0) {
    // A full-size run also reads at least 4x the last-level cache, so no part of the buffer is served from it.
    uint64_t bytes = opt.bandwidth_bytes;
    if (bytes >= (uint64_t{1} << 30)) bytes = std::max(bytes, 4 * r.llc_bytes);
    probe.emplace(bytes, r.n_threads);
    const ReadBandwidth bw = probe->measure(opt.bandwidth_runs);
    log(fmt::format("DRAM read bandwidth: {:.2f} GB/s over {} MiB, {} thread{}", bw.bytes_per_s / 1e9,
                    bw.buffer_bytes >> 20, r.n_threads, r.n_threads == 1 ? "" : "s"));
    r.bandwidth_bytes_per_s = bw.bytes_per_s;
    r.bandwidth_buffer_bytes = bw.buffer_bytes;
    r.bandwidth_loads = bw.loads;
  }
  // Weights that fit in the last-level cache are not read from DRAM: no
  // bound, and no readings around each repetition (which would take longer
  // than the repetition itself).
  r.weights_fit_in_llc = r.llc_bytes > 0 && r.weight_bytes_per_token <= r.llc_bytes;
  const bool bounded = probe && r.weight_bytes_per_token > 0 && !r.weights_fit_in_llc;

  {  // Page the weights in: the first touch of an mmap'd file is not compute.
    LlamaContext warm(model, 1, r.n_threads);
    warm.eval(bench_tokens(1, c.n_vocab, 7));
  }

  // One context per test, with opt.depth positions prefilled (untimed, in
  // batches of 512 so the activations stay small); each repetition truncates
  // back to the depth, which touches no memory.
  const std::vector<int32_t> depth_tokens = bench_tokens(opt.depth, c.n_vocab, 4242);
  auto context_at_depth = [&](int32_t n_more) {
    auto ctx = std::make_unique<LlamaContext>(model, opt.depth + n_more, r.n_threads, opt.kv_type);
    for (int32_t p = 0; p < opt.depth; p += 512)
      ctx->eval(std::span(depth_tokens).subspan(static_cast<size_t>(p), static_cast<size_t>(std::min(512, opt.depth - p))));
    return ctx;
  };
  const std::string at_depth = opt.depth > 0 ? fmt::format(" @ d{}", opt.depth) : "";

  for (int32_t n : opt.n_prompt) {
    if (n <= 0) continue;
    BenchModelRow row;
    row.test = fmt::format("pp{}{}", n, at_depth);
    row.decode = false;
    row.n_tokens = n;
    const std::vector<int32_t> tokens = bench_tokens(n, c.n_vocab, static_cast<uint32_t>(n));
    const auto ctx = context_at_depth(n);
    // One untimed run first, as llama-bench does: the first prefill of a
    // process ran 15-25% slower than the next ones (fresh heap pages, the
    // prefill kernels' first use on each thread), which is not what a
    // running server sees.
    ctx->eval(tokens);
    for (int32_t rep = 0; rep < opt.reps; ++rep) {
      ctx->truncate(opt.depth);
      const auto t0 = Clock::now();
      ctx->eval(tokens);
      row.tps.push_back(n / seconds_since(t0));
      log(fmt::format("{} rep {}: {:.2f} t/s", row.test, rep + 1, row.tps.back()));
    }
    set_mean_and_stddev(row);
    r.rows.push_back(std::move(row));
  }

  for (int32_t n : opt.n_gen) {
    if (n <= 0) continue;
    BenchModelRow row;
    row.test = fmt::format("tg{}{}", n, at_depth);
    row.decode = true;
    row.n_tokens = n;
    const std::vector<int32_t> tokens = bench_tokens(n + 1, c.n_vocab, static_cast<uint32_t>(n) + 99);
    std::vector<double> bounds;
    const auto ctx = context_at_depth(n + 1);
    for (int32_t rep = 0; rep < opt.reps; ++rep) {
      ctx->truncate(opt.depth);
      const double bw_before = bounded ? probe->measure(opt.bandwidth_runs).bytes_per_s : 0;
      ctx->eval(std::span(tokens).first(1));
      const auto t0 = Clock::now();
      for (int32_t i = 1; i <= n; ++i) ctx->eval(std::span(tokens).subspan(static_cast<size_t>(i), 1));
      row.tps.push_back(n / seconds_since(t0));
      std::string share;
      if (bounded) {
        const double bw = (bw_before + probe->measure(opt.bandwidth_runs).bytes_per_s) / 2;
        bounds.push_back(bw / static_cast<double>(r.weight_bytes_per_token));
        share = fmt::format(", {:.1f}% of the bound from {:.2f} GB/s read around it",
                            100.0 * row.tps.back() / bounds.back(), bw / 1e9);
      }
      log(fmt::format("{} rep {}: {:.2f} t/s{}", row.test, rep + 1, row.tps.back(), share));
    }
    set_mean_and_stddev(row);
    if (bounded) set_bound(row, std::move(bounds));
    r.rows.push_back(std::move(row));
  }
  return r;
}

std::string bench_model_markdown(const BenchModelReport& r) {
  std::string out;
  if (r.bandwidth_bytes_per_s > 0)
    out += fmt::format("DRAM read bandwidth: {:.2f} GB/s (threads: {}, {} loads, best run over {} MiB); ",
                       r.bandwidth_bytes_per_s / 1e9, r.n_threads, r.bandwidth_loads, r.bandwidth_buffer_bytes >> 20);
  out += fmt::format("KV cache: {}; weights read per token: {:.2f} MiB", r.kv_type, r.weight_bytes_per_token / 1048576.0);
  if (r.weights_fit_in_llc)
    out += fmt::format(" (they fit in the {:.0f} MiB last-level cache: decode is not DRAM-bound, the bound does not apply)",
                       r.llc_bytes / 1048576.0);
  out += "\n\n";
  out += "| model | size | params | type | threads | test | t/s | bound t/s | % of bound |\n";
  out += "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: |\n";
  for (const BenchModelRow& row : r.rows) {
    const bool shown = row.bound_tps > 0;
    const std::string bound = shown ? fmt::format("{:.2f}", row.bound_tps) : "-";
    const std::string pct = shown ? fmt::format("{:.1f}", row.percent_of_bound) : "-";
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} |\n", r.model,
                       human_size(r.size_bytes), human_count(r.n_params), r.type, r.n_threads, row.test, row.mean,
                       row.stddev, bound, pct);
  }
  return out;
}

std::string bench_model_json(const BenchModelReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BenchModelRow& row : r.rows) {
    nlohmann::json j = {{"test", row.test},         {"kind", row.decode ? "decode" : "prefill"},
                        {"n_tokens", row.n_tokens}, {"tokens_per_s", row.tps},
                        {"mean_tps", row.mean},     {"stddev_tps", row.stddev}};
    if (row.bound_tps > 0) {
      j["bound_tps"] = row.bound_tps;
      j["bound_tps_per_rep"] = row.bound_tps_reps;
      j["percent_of_bound"] = row.percent_of_bound;
    }
    rows.push_back(std::move(j));
  }
  const nlohmann::json doc = {
      {"model", r.model},
      {"path", r.path},
      {"type", r.type},
      {"size_bytes", r.size_bytes},
      {"n_params", r.n_params},
      {"n_threads", r.n_threads},
      {"depth", r.depth},
      {"kv_type", r.kv_type},
      {"weight_bytes_per_token", r.weight_bytes_per_token},
      {"llc_bytes", r.llc_bytes},
      {"weights_fit_in_llc", r.weights_fit_in_llc},
      {"dram_read_bytes_per_s", r.bandwidth_bytes_per_s},
      {"dram_buffer_bytes", r.bandwidth_buffer_bytes},
      {"dram_loads", r.bandwidth_loads},
      {"results", rows},
  };
  return doc.dump(2) + "\n";
}

}  // namespace nexus
