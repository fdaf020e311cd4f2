// bench-model and the `nexus synth` / `nexus bench-model` commands, on a tiny
// synthetic model. No timing assertions: measured rates only have to exist;
// what is derived from them (mean, deviation, bound) and the model's sizes
// are checked with known numbers in and known numbers out.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "model/bench_model.h"
#include "model/synth.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/mem_bandwidth.h"

namespace nexus {
namespace {

struct CmdResult {
  int rc;
  std::string out;
};

// Runs a shell command, capturing stdout and stderr together.
CmdResult run(const std::string& cmd) {
  CmdResult r{0, ""};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string tiny_model(const std::string& dir) {
  SynthOptions opt;
  opt.shape.n_embd = 64, opt.shape.n_layer = 2, opt.shape.n_head = 4, opt.shape.n_head_kv = 2;
  opt.shape.n_ff = 128, opt.shape.n_vocab = 96, opt.shape.n_ctx = 64;
  opt.type = GgmlType::Q8_0;
  const std::string path = dir + "/tiny.gguf";
  synth_model(opt, path);
  return path;
}

TEST(MemBandwidth, MeasuresAPositiveRate) {
  const ReadBandwidth bw = measure_read_bandwidth(uint64_t{4} << 20, 2, 2);
  EXPECT_GT(bw.bytes_per_s, 0);
  EXPECT_TRUE(std::isfinite(bw.bytes_per_s));
  EXPECT_EQ(bw.buffer_bytes, uint64_t{4} << 20);
  EXPECT_EQ(bw.n_threads, 2);
  EXPECT_THROW(measure_read_bandwidth(1 << 20, 0, 1), Error);
  EXPECT_THROW(measure_read_bandwidth(1 << 20, 1, 0), Error);
}

TEST(BenchModel, ReportsEveryTestWithBoundForDecode) {
  const std::string path = tiny_model(test::make_temp_dir());
  BenchModelOptions opt;
  opt.n_prompt = {8, 0, 16};
  opt.n_gen = {4};
  opt.n_threads = 2;
  opt.reps = 2;
  opt.bandwidth_bytes = uint64_t{8} << 20;
  opt.bandwidth_runs = 1;
  const BenchModelReport r = bench_model(path, opt);
  ASSERT_EQ(r.rows.size(), 3u);  // the 0 entry is skipped
  EXPECT_EQ(r.rows[0].test, "pp8");
  EXPECT_EQ(r.rows[1].test, "pp16");
  EXPECT_EQ(r.rows[2].test, "tg4");
  EXPECT_TRUE(r.rows[2].decode);
  for (const BenchModelRow& row : r.rows) {
    ASSERT_EQ(row.tps.size(), 2u);
    EXPECT_GT(row.mean, 0);
  }
  EXPECT_EQ(r.rows[0].bound_tps, 0);
  EXPECT_TRUE(r.rows[0].bound_tps_reps.empty());
  // The decode row is bounded per repetition unless the weights fit in the
  // last-level cache (this test model does, where the OS reports the cache).
  const BenchModelRow& tg = r.rows[2];
  EXPECT_EQ(r.weights_fit_in_llc, r.llc_bytes > 0);  // its 84 KiB fit in any last-level cache
  EXPECT_EQ(tg.bound_tps_reps.size(), r.weights_fit_in_llc ? 0u : 2u);
  EXPECT_EQ(tg.bound_tps > 0, !r.weights_fit_in_llc);
  // tiny_model's shape, by hand: head_dim 16, so K and V are 32 x 64.
  //   token_embd 96 x 64 = 6144, output 6144, output_norm 64;
  //   per layer: norms 2 x 64, Q and O 4096 each, K and V 2048 each,
  //   gate/up/down 8192 each: 36864 in matrices + 128 = 36992.
  EXPECT_EQ(r.n_params, 6144u + 6144 + 64 + 2 * 36992);  // 86336
  // Q8_0 stores 32 values in 34 bytes; norms are F32. Per token every weight
  // but the embedding table is read: output 6144 / 32 * 34 = 6528, norm 256,
  // per layer 36864 / 32 * 34 + 2 * 256 = 39680.
  EXPECT_EQ(r.weight_bytes_per_token, 6528u + 256 + 2 * 39680);  // 86144
  EXPECT_EQ(r.size_bytes, r.weight_bytes_per_token + 6528);       // + token_embd
  EXPECT_EQ(r.type, "Q8_0");
  EXPECT_EQ(r.n_threads, 2);

  const std::string md = bench_model_markdown(r);
  EXPECT_NE(md.find("| model | size | params | type | threads | test | t/s |"), std::string::npos) << md;
  EXPECT_NE(md.find("| Q8_0 | 2 | tg4 | "), std::string::npos) << md;
  EXPECT_NE(md.find(" ± "), std::string::npos) << md;
  const auto j = nlohmann::json::parse(bench_model_json(r));
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][2]["kind"], "decode");
  EXPECT_EQ(j["weights_fit_in_llc"].get<bool>(), r.weights_fit_in_llc);
  if (r.weights_fit_in_llc) {
    EXPECT_FALSE(j["results"][2].contains("percent_of_bound"));
    EXPECT_NE(md.find("the bound does not apply"), std::string::npos) << md;
  } else {
    EXPECT_DOUBLE_EQ(j["results"][2]["percent_of_bound"].get<double>(), tg.percent_of_bound);
    EXPECT_EQ(j["results"][2]["bound_tps_per_rep"].size(), 2u);
  }
  EXPECT_FALSE(j["results"][0].contains("bound_tps"));
}

// set_bound: the row's bound is the mean of the repetitions' bounds, its
// share the mean of their shares (not mean t/s over mean bound), and both
// outputs report them.
TEST(BenchModel, BoundIsTheMeanOfTheRepetitionsBoundsAndShares) {
  BenchModelRow row;
  row.test = "tg8";
  row.decode = true;
  row.tps = {30, 40};
  set_bound(row, {40, 80});
  EXPECT_EQ(row.bound_tps_reps, (std::vector<double>{40, 80}));
  EXPECT_DOUBLE_EQ(row.bound_tps, 60);
  EXPECT_DOUBLE_EQ(row.percent_of_bound, 62.5);  // (75% + 50%) / 2; 35 / 60 would be 58.3%
  EXPECT_THROW(set_bound(row, {40}), Error);
  EXPECT_THROW(set_bound(row, {40, 0}), Error);

  BenchModelReport r;
  r.model = "m";
  r.type = "Q8_0";
  r.rows = {row};
  const std::string md = bench_model_markdown(r);
  EXPECT_NE(md.find("| tg8 | 0.00 ± 0.00 | 60.00 | 62.5 |"), std::string::npos) << md;
  const auto j = nlohmann::json::parse(bench_model_json(r));
  EXPECT_DOUBLE_EQ(j["results"][0]["percent_of_bound"].get<double>(), 62.5);
  EXPECT_EQ(j["results"][0]["bound_tps_per_rep"], nlohmann::json::array({40.0, 80.0}));
}

// A row's mean and sample standard deviation (n - 1) from known rates, and
// how both outputs print them.
TEST(BenchModel, RowMeanAndStddevFromKnownRates) {
  BenchModelRow row;
  row.test = "pp8";
  row.tps = {10, 20, 30};  // deviations -10, 0, 10: sqrt(200 / 2)
  set_mean_and_stddev(row);
  EXPECT_DOUBLE_EQ(row.mean, 20);
  EXPECT_DOUBLE_EQ(row.stddev, 10);

  BenchModelReport r;
  r.model = "m";
  r.type = "F32";
  r.rows = {row};
  const std::string md = bench_model_markdown(r);
  EXPECT_NE(md.find("| pp8 | 20.00 ± 10.00 | - | - |"), std::string::npos) << md;
  const auto j = nlohmann::json::parse(bench_model_json(r));
  EXPECT_DOUBLE_EQ(j["results"][0]["mean_tps"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(j["results"][0]["stddev_tps"].get<double>(), 10);

  row.tps = {1, 2, 3, 4};  // squares 2.25 + 0.25 + 0.25 + 2.25 = 5: sqrt(5 / 3)
  set_mean_and_stddev(row);
  EXPECT_DOUBLE_EQ(row.mean, 2.5);
  EXPECT_NEAR(row.stddev, 1.2909944487, 1e-9);
  row.tps = {42};  // one repetition: no spread
  set_mean_and_stddev(row);
  EXPECT_DOUBLE_EQ(row.mean, 42);
  EXPECT_EQ(row.stddev, 0);
  row.tps = {7, 7, 7};
  set_mean_and_stddev(row);
  EXPECT_DOUBLE_EQ(row.mean, 7);
  EXPECT_EQ(row.stddev, 0);
}

TEST(BenchModel, RefusesTestsLongerThanTheContext) {
  const std::string path = tiny_model(test::make_temp_dir());
  BenchModelOptions opt;
  opt.bandwidth_bytes = 0;
  opt.n_prompt = {65};  // context 64
  opt.n_gen = {};
  EXPECT_THROW(bench_model(path, opt), Error);
  opt.n_prompt = {};
  opt.n_gen = {64};  // needs 65 positions with the 1-token prompt
  EXPECT_THROW(bench_model(path, opt), Error);
  opt.n_gen = {4};
  opt.reps = 0;
  EXPECT_THROW(bench_model(path, opt), Error);
  opt.reps = 1;
  opt.depth = 40;  // 40 + 25 positions > 64
  opt.n_gen = {};
  opt.n_prompt = {25};
  EXPECT_THROW(bench_model(path, opt), Error);
  opt.n_prompt = {};
  opt.n_gen = {24};  // 40 + 1 + 24 > 64
  EXPECT_THROW(bench_model(path, opt), Error);
}

// At a depth (llama-bench's -d) each row runs after that many positions are
// in the cache, in the storage asked for, and says so in its name.
TEST(BenchModel, TestsAtADepthNameItAndFitTheContext) {
  const std::string path = tiny_model(test::make_temp_dir());
  BenchModelOptions opt;
  opt.bandwidth_bytes = 0;
  opt.n_threads = 2;
  opt.reps = 2;
  opt.depth = 40;
  opt.kv_type = KvType::Q8_0;
  opt.n_prompt = {24};  // 40 + 24 = the whole context of 64
  opt.n_gen = {4};
  const BenchModelReport r = bench_model(path, opt);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].test, "pp24 @ d40");
  EXPECT_EQ(r.rows[1].test, "tg4 @ d40");
  for (const BenchModelRow& row : r.rows) EXPECT_EQ(row.tps.size(), 2u);
  EXPECT_NE(bench_model_markdown(r).find("KV cache: q8_0"), std::string::npos);
  const auto j = nlohmann::json::parse(bench_model_json(r));
  EXPECT_EQ(j["depth"], 40);
  EXPECT_EQ(j["kv_type"], "q8_0");
}

TEST(Cli, SynthThenBenchModel) {
  const std::string dir = test::make_temp_dir();
  const std::string bin = test::nexus_binary();
  const std::string model = dir + "/cli.gguf";
  CmdResult r = run(bin + " synth --dim 64 --layers 1 --heads 4 --kv-heads 2 --ffn 64 --vocab 64 --ctx 64 --type Q4_0 --seed 3 -o " + model);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("wrote " + model), std::string::npos) << r.out;
  {
    const GgufFile f(model);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q4_0);
    EXPECT_EQ(*f.get_int("llama.attention.head_count_kv"), 2);
    EXPECT_EQ(*f.get_int("nexus.synth.seed"), 3);
  }

  r = run(bin + " bench-model -m " + model + " -p 8,16 -n 4 -t 1 -r 1 --bw-mib 4 -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("| pp8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| pp16 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DRAM read bandwidth"), std::string::npos) << r.out;

  // Without --vocab-from the model has no tokenizer: `run` says so and how to add one.
  r = run(bin + " run -m " + model + " -p hi -n 1");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--vocab-from"), std::string::npos) << r.out;

  r = run(bin + " bench-model -m " + model + " -p 0 -n 4 -t 1 -r 1 --bw-mib 0 -q --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["test"], "tg4");

  // At a depth, with a KV type named in any case (as serve takes it).
  r = run(bin + " bench-model -m " + model + " -p 4 -n 0 -d 8 --kv-type Q8_0 -t 1 -r 1 --bw-mib 0 -q --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto at_depth = nlohmann::json::parse(r.out);
  EXPECT_EQ(at_depth["results"][0]["test"], "pp4 @ d8");
  EXPECT_EQ(at_depth["kv_type"], "q8_0");
}

TEST(Cli, SynthRejectsBadArguments) {
  const std::string dir = test::make_temp_dir();
  const std::string bin = test::nexus_binary();
  CmdResult r = run(bin + " synth --preset tinyllama-1.1b --type Q5_K -o " + dir + "/x.gguf");
  EXPECT_EQ(r.rc, 2);  // usage errors
  EXPECT_NE(r.out.find("Q5_K"), std::string::npos) << r.out;
  r = run(bin + " synth --preset nope -o " + dir + "/x.gguf");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("unknown preset"), std::string::npos) << r.out;
  r = run(bin + " synth --dim 64 --layers 1 -o " + dir + "/x.gguf");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("--heads"), std::string::npos) << r.out;
  r = run(bin + " bench-model -m " + dir + "/missing.gguf -q");
  EXPECT_EQ(r.rc, 1);  // the work failed
  EXPECT_NE(r.out.find("missing.gguf"), std::string::npos) << r.out;
}

// Out-of-range test sizes and counts are refused naming the option, before
// any model is loaded (a negative size used to be skipped silently, and a
// negative --bw-mib wrapped to a huge buffer).
TEST(Cli, BenchModelRefusesOutOfRangeArguments) {
  const std::string bin = test::nexus_binary();
  for (const auto& [args, option] : std::vector<std::pair<std::string, std::string>>{
           {"-p -16", "--n-prompt"},
           {"-p 16,-16", "--n-prompt"},
           {"-n -5", "--n-gen"},
           {"-r 0", "--repetitions"},
           {"-r -1", "--repetitions"},
           {"--bw-mib -5", "--bw-mib"},
           {"--bw-runs 0", "--bw-runs"},
           {"-b 0", "--batch"},
           {"-b 8,-1", "--batch"},
           {"-d -1", "--depth"},
           {"--kv-type q4_0", "--kv-type"}}) {
    const CmdResult r = run(bin + " bench-model -m /nonexistent.gguf -q " + args);
    EXPECT_EQ(r.rc, 2) << args;
    EXPECT_NE(r.out.find(option), std::string::npos) << args << ": " << r.out;
    EXPECT_LT(r.out.size(), 300u) << args << ": " << r.out;  // no 300-digit range bound
  }
}

}  // namespace
}  // namespace nexus
