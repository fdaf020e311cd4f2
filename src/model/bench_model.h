// Model throughput benchmark (`nexus bench-model`), in the manner of
// llama.cpp's llama-bench:
//   ppN  prefill: one eval of N tokens into a fresh LlamaContext;
//        t/s = N / seconds of that eval.
//   tgN  decode: after a 1-token prompt (not timed), N evals of one token
//        each; t/s = N / seconds of the N evals.
// Each test runs `reps` times (fresh context each time) and reports the mean
// and sample standard deviation of t/s. Before the first test, one 1-token
// eval pages the weights in (the file is memory-mapped).
//
// Decode is memory-bound: each token reads every weight once (LlamaModel::
// weight_bytes()). The report therefore includes the DRAM read bandwidth
// measured with the same thread count (util/mem_bandwidth.h) and, for tg
// rows, the bound bandwidth / weight_bytes tokens/s and the share of it
// reached. Each tg repetition gets its own bound, from readings taken right
// before and right after it: on a shared VM the bandwidth moves by tens of
// percent within minutes, and one reading at the start bounded the later
// runs badly (a run of 2026-12-02 "reached" 114% of it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/kv_cache.h"

namespace nexus {

class GgufFile;

struct BenchModelOptions {
  std::vector<int32_t> n_prompt = {128, 512};  // pp tests (tokens); 0 entries are skipped
  std::vector<int32_t> n_gen = {128};          // tg tests (tokens); 0 entries are skipped
  // Positions already in the cache before each test (llama-bench's -d): a
  // prefill of `depth` tokens, untimed, once per test; every repetition then
  // truncates back to it. Rows read "pp512 @ d4096". 0 = a fresh context.
  int32_t depth = 0;
  KvType kv_type = KvType::F32;                // the cache's K/V storage (llama-bench's -ctk/-ctv)
  int32_t n_threads = 0;                       // 0 = hardware concurrency
  int32_t reps = 3;
  // Buffer for the bandwidth run; 0 = skip it. From 1 GiB up it is raised to
  // 4x the last-level cache when that is larger.
  uint64_t bandwidth_bytes = uint64_t{1} << 30;
  int32_t bandwidth_runs = 5;
  std::function<void(const std::string&)> log;  // progress lines (optional)
};

struct BenchModelRow {
  std::string test;            // "pp128", "tg128", "pp512 @ d4096"
  bool decode = false;
  int32_t n_tokens = 0;
  std::vector<double> tps;     // tokens/s of each rep
  double mean = 0, stddev = 0; // tokens/s
  // Decode rows with a bandwidth run and weights larger than the last-level
  // cache, else empty / 0 (set_bound()): per rep, the bound from the mean of
  // two readings taken just before and just after it (bandwidth / weight
  // bytes per token, tokens/s); their mean; and the mean over reps of
  // tps / bound, in percent.
  std::vector<double> bound_tps_reps;
  double bound_tps = 0;
  double percent_of_bound = 0;
};

// Sets row.mean and row.stddev from row.tps (non-empty): the mean and the
// sample standard deviation (divided by n - 1; 0 for one repetition).
void set_mean_and_stddev(BenchModelRow& row);

// Sets row's bound_tps_reps to `bound_tps_reps` (one per entry of row.tps,
// tokens/s, > 0) and derives bound_tps and percent_of_bound from them.
// Throws nexus::Error when the counts differ or a bound is not positive.
void set_bound(BenchModelRow& row, std::vector<double> bound_tps_reps);

struct BenchModelReport {
  std::string model;         // general.name (the file's stem when it is only the architecture)
  std::string path;
  std::string type;          // weight type of the layer matrices ("Q4_0")
  uint64_t size_bytes = 0;   // all tensor data
  uint64_t n_params = 0;     // all tensor elements
  uint64_t weight_bytes_per_token = 0;
  uint64_t llc_bytes = 0;    // last-level cache size when the OS reports it, else 0
  // weight_bytes_per_token <= llc_bytes: decode does not stream the weights
  // from DRAM, so no bound is measured (no bandwidth readings per rep).
  bool weights_fit_in_llc = false;
  int32_t n_threads = 0;
  int32_t depth = 0;            // BenchModelOptions::depth
  std::string kv_type = "f32";  // kv_type_name() of BenchModelOptions::kv_type
  double bandwidth_bytes_per_s = 0;  // the reading before the tests; 0 when not measured
  uint64_t bandwidth_buffer_bytes = 0;
  std::string bandwidth_loads;
  std::vector<BenchModelRow> rows;
};

// Loads the model at `path` and runs the tests. Throws nexus::Error for an
// unreadable model, reps < 1, or a test longer than the model's context.
BenchModelReport bench_model(const std::string& path, const BenchModelOptions& opt);
// The same over an opened file; `id` names the model when general.name only
// repeats the architecture (the file's stem above).
BenchModelReport bench_model(const GgufFile& gguf, const std::string& id, const BenchModelOptions& opt);

// llama-bench style markdown table (header, separator, one line per test),
// preceded by a line on the bandwidth and weights read per token.
std::string bench_model_markdown(const BenchModelReport& r);
// The report as a JSON document.
std::string bench_model_json(const BenchModelReport& r);

}  // namespace nexus
