// `nexus run` end to end: the built binary on stories260K, and its errors.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <sys/wait.h>

#include "support/serve_process.h"
#include "support/test_support.h"

namespace {

using Result = nexus::test::CommandResult;
using nexus::test::read_file;
using nexus::test::run_nexus;
const auto quote = nexus::test::shell_quote;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string reference_text(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in).at("text").get<std::string>();
}

// The seed a random run used, from "nexus run: seed N (random; --seed N repeats it)".
std::string printed_seed(const std::string& err, const std::string& who) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(who + R"(: seed (\d+) \(random; --seed (\d+) repeats it\))")) ||
      m[1] != m[2])
    return "";
  return m[1];
}

}  // namespace

TEST(CliRun, GreedyMatchesReference) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  NEXUS_REQUIRE_SHARED(ref, "reference/stories260K__Once_upon_a_time.json");
  Result r = run_nexus("run -m " + quote(model) + " --temp 0 -n 64 -t 1 -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(trim(r.out).find(trim(reference_text(ref))), std::string::npos) << r.out;
  // The timing report goes to stderr, not into the generated text.
  EXPECT_NE(r.err.find("TTFT"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("TTFT"), std::string::npos);
}

TEST(CliRun, PromptFromStdinAndStopString) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  NEXUS_REQUIRE_SHARED(ref, "reference/stories260K__Once_upon_a_time.json");
  Result r = run_nexus("run -m " + quote(model) + " --temp 0 -n 64 -t 1 --stop Lily", "Once upon a time\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = reference_text(ref);
  EXPECT_EQ(trim(r.out), trim(text.substr(0, text.find("Lily"))));
}

// -n beyond the context: the generation stops at the context's end, and the
// user is told so up front instead of finding fewer tokens than asked for.
TEST(CliRun, NPredictBeyondContextIsReported) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  Result r = run_nexus("run -m " + quote(model) + " --temp 0 --ignore-eos -c 32 -n 100 -t 1 -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // "Once upon a time" is 5 tokens with BOS: 32 - 5 = 27 fit.
  EXPECT_NE(r.err.find("note: -n 100: the 5-token prompt leaves room for 27 tokens in the 32-token context"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("generation: 27 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("finish:     length"), std::string::npos) << r.err;
}

// --seed -1 (run's default) picks a random seed and prints it; that seed
// given back repeats the run. CLI11 used to read -1 as 2^64 - 1, a fixed seed.
TEST(CliRun, SeedMinusOneIsRandomPrintedAndRepeatable) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const std::string args =
      "run -m " + quote(model) + " --temp 1 --top-k 0 --top-p 1 --min-p 0 -n 24 -t 1 -p 'Once upon a time'";
  const Result a = run_nexus(args + " --seed -1");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string seed = printed_seed(a.err, "nexus run");
  ASSERT_FALSE(seed.empty()) << a.err;
  const Result b = run_nexus(args);  // the default is -1 too: another random seed
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_FALSE(printed_seed(b.err, "nexus run").empty()) << b.err;
  EXPECT_NE(printed_seed(b.err, "nexus run"), seed);

  const Result again = run_nexus(args + " --seed " + seed);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, a.out) << "--seed " << seed << " did not repeat the run";
  EXPECT_EQ(again.err.find("random"), std::string::npos) << again.err;  // a given seed is not printed
  EXPECT_EQ(run_nexus(args + " --seed 18446744073709551615").exit_code, 0);
  // A greedy run draws nothing: no seed line to suggest its output is random.
  const Result greedy = run_nexus("run -m " + quote(model) + " --temp 0 -n 4 -t 1 -p 'Once upon a time'");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_EQ(greedy.err.find("seed"), std::string::npos) << greedy.err;
}

// bench and synth take -1 the same way (their defaults stay fixed: 0 and 1).
TEST(CliMain, BenchAndSynthSeedMinusOneIsPrinted) {
  const Result bench = run_nexus("bench --seed -1 --url http://127.0.0.1:1 -n 1 --no-progress");
  EXPECT_EQ(bench.exit_code, 1) << bench.err;  // nothing listens there: the work fails
  EXPECT_FALSE(printed_seed(bench.err, "nexus bench").empty()) << bench.err;

  const std::string dir = nexus::test::make_temp_dir();
  const std::string out = dir + "/seed.gguf";
  const Result synth =
      run_nexus("synth --dim 64 --layers 1 --heads 4 --ffn 64 --vocab 64 --ctx 64 --seed -1 -o " + quote(out));
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  const std::string seed = printed_seed(synth.err, "nexus synth");
  ASSERT_FALSE(seed.empty()) << synth.err;
  const Result info = run_nexus("info --no-tensors " + quote(out));
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(std::regex_search(info.out, std::regex(R"(nexus\.synth\.seed\s+UINT64\s+)" + seed + "\n"))) << info.out;
}

// -c N bounds the prompt and the output together: never more than N tokens
// (with -c 16 a run used to end at 17). Sizes on and off a KV block's 16.
TEST(CliRun, ContextSizeBoundsPromptPlusOutput) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  auto count = [](const std::string& err, const char* what) {
    std::smatch m;
    return std::regex_search(err, m, std::regex(std::string(what) + R"(:\s+(\d+) tokens)")) ? std::stoi(m[1]) : -1;
  };
  for (int ctx : {8, 16, 17, 33}) {
    const Result r = run_nexus("run -m " + quote(model) + " --temp 0 --ignore-eos -n 100 -t 1 -c " +
                               std::to_string(ctx) + " -p 'Once upon a time'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const int prompt = count(r.err, "prompt"), generated = count(r.err, "generation");
    EXPECT_EQ(prompt, 5) << r.err;  // BOS + 4
    EXPECT_EQ(prompt + generated, ctx) << "-c " << ctx << ": " << r.err;  // --ignore-eos: it fills the context
    EXPECT_NE(r.err.find("leaves room for " + std::to_string(ctx - 5) + " tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("finish:     length"), std::string::npos) << r.err;
  }
  // -n that just fits: no note, and all of it.
  const Result fits =
      run_nexus("run -m " + quote(model) + " --temp 0 --ignore-eos -n 11 -t 1 -c 16 -p 'Once upon a time'");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.err.find("note:"), std::string::npos) << fits.err;
  EXPECT_EQ(count(fits.err, "generation"), 11) << fits.err;
}

TEST(CliRun, MissingModelFailsClearly) {
  Result r = run_nexus("run -m /nonexistent/dir/model.gguf -p hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/dir/model.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

// serve, run, info, tokenize and bench-model share one check and one wording.
TEST(CliMain, EveryCommandWordsAMissingModelTheSame) {
  const std::string path = "/nonexistent/dir/model.gguf";
  for (const std::string& cmd : {"run -m " + path + " -p hi", "serve -m " + path, "info " + path, "info -m " + path,
                                 "tokenize -m " + path + " hello", "bench-model -q -m " + path}) {
    const Result r = run_nexus(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_NE(r.err.find("model file not found: " + path + " (pass one with -m PATH)"), std::string::npos)
        << cmd << ": " << r.err;
  }
}

// An empty model path (an unset $MODEL, say) is a usage error, never the
// built-in model served without a word.
TEST(CliMain, EveryCommandRefusesAnEmptyModelPath) {
  for (const std::string& cmd : {"run -m '' -p hi", "serve -m ''", "info ''", "info -m ''", "tokenize -m '' hello",
                                 "bench-model -q -m ''", "perplexity -m '' -f /dev/null",
                                 "perplexity -f /dev/null --kl-divergence-base ''", "quantize '' /tmp/x.gguf q8_0"}) {
    const Result r = run_nexus(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("an empty path names no model"), std::string::npos) << cmd << ": " << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << cmd;
  }
}

// Usage errors exit 2 (as an unknown subcommand does) and name what is wrong
// with a numeric value; --help and --version still exit 0.
TEST(CliMain, UsageErrorsExitTwoAndWordBadNumbers) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"run -n abc", "--n-predict: 'abc' is not an integer"},
                        Case{"run -n 1.5", "--n-predict: '1.5' is not an integer"},
                        Case{"run -n 0", "--n-predict: 0 is outside 1 to 2147483647"},
                        Case{"run -n 99999999999", "--n-predict: 99999999999 is outside 1 to 2147483647"},
                        Case{"run -n 12x", "--n-predict: '12x' is not an integer"},
                        Case{"serve --drain-timeout 1e9", "--drain-timeout: 1e9 is outside 0 to 3600"},
                        Case{"serve --drain-timeout soon", "'soon' is not a number"},
                        Case{"bench --rate 0", "--rate: 0 is not a number above 0"},
                        Case{"bench --rate 1e999", "--rate: 1e999 is not a number above 0"},
                        Case{"bench --duration 1x", "--duration: '1x' is not a number"},
                        Case{"bench --price-per-hour -1", "--price-per-hour: -1 is outside 0 to 1000000000"},
                        Case{"run --temp -1", "--temp: -1 is below 0"},
                        Case{"run --top-p 2", "--top-p: 2 is outside 0 to 1"},
                        Case{"run --top-p nan", "--top-p: 'nan' is not a number"},
                        Case{"run --min-p -0.5", "--min-p: -0.5 is outside 0 to 1"},
                        Case{"run --top-k -1", "--top-k: -1 is outside 0 to 2147483647"},
                        Case{"run --repeat-penalty 0", "--repeat-penalty: 0 is not a number above 0"},
                        Case{"run --repeat-last-n -2", "--repeat-last-n: -2 is outside -1 to 2147483647"},
                        Case{"run --presence-penalty inf", "--presence-penalty: 'inf' is not a number"},
                        Case{"run -c -1", "--ctx-size: -1 is outside 0 to 2147483647"},
                        Case{"run --seed -2", "--seed: -2 is not a seed: use 0 to 18446744073709551615, or -1"},
                        Case{"run --seed 18446744073709551616", "--seed: 18446744073709551616 is not a seed"},
                        Case{"bench --seed -2", "--seed: -2 is not a seed"},
                        Case{"synth --seed abc -o /dev/null", "--seed: abc is not a seed"},
                        Case{"serve --port 99999", "--port: 99999 is outside 0 to 65535"},
                        Case{"serve --kv-type q4_0", "--kv-type: 'q4_0' is not a KV type: use f16, f32 or q8_0"},
                        Case{"serve --kv-memory 2X", "--kv-memory: '2X' is not a size"},
                        Case{"serve --chat-template bogus", "--chat-template: bogus not in {auto,plain}"},
                        Case{"serve --max-queue 0", "--max-queue: 0 is outside 1 to 2147483647"},
                        Case{"synth --type Q5_K -o /dev/null", "--type: unsupported type 'Q5_K'"},
                        Case{"synth --preset nope -o /dev/null", "--preset: unknown preset 'nope'"},
                        Case{"synth --dim 64 --layers 1 -o /dev/null", "without --preset, give --dim"},
                        Case{"synth --dim 65 --layers 1 --heads 4 --ffn 64 --vocab 64 -o /dev/null",
                             "n_embd 65 is not a multiple of n_head 4"},
                        Case{"bench --extra-body notjson", "--extra-body: 'notjson' is not a JSON object"},
                        Case{"bench --timeout 0", "--timeout: 0 is not a number above 0"},
                        Case{"bench --timeout 1e6", "--timeout: 1e6 is outside 0 to 86400"},
                        Case{"bench --url ftp://x", "--url: ftp://x: expected http://HOST"},
                        Case{"bench --max-tokens uniform:5", "--max-tokens: length spec 'uniform:5'"},
                        Case{"bench -n 0", "--requests: 0 is outside 1 to"},
                        Case{"bench --sweep-rate 1 --sweep-concurrency 2", "excludes"},
                        Case{"info --array-items -1", "--array-items: -1 is outside 0 to"},
                        Case{"info -m a.gguf b.gguf", "excludes"}, Case{"run --no-such-flag", "no-such-flag"},
                        Case{"frobnicate", "unknown subcommand 'frobnicate'"}}) {
    const Result r = run_nexus(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
  }
  EXPECT_EQ(run_nexus("--help").exit_code, 0);
  EXPECT_EQ(run_nexus("--version").exit_code, 0);
  EXPECT_EQ(run_nexus("run --help").exit_code, 0);
}

// Values only the model can check, and combinations of options, are usage
// errors too: exit 2 with CLI11's layout, the option named. (The work itself
// failing, a missing model say, stays exit 1: EveryCommandWordsAMissingModelTheSame.)
TEST(CliMain, UsageErrorsFoundAfterParsingExitTwo) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const std::string m = "-m " + quote(model);
  const std::string too_long = "--ctx-size: 99999 exceeds the model's context of 2048 tokens";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"run " + m + " -c 99999 -p hi", too_long}, Case{"serve " + m + " -c 99999", too_long},
                        Case{"bench-model " + m + " -q -p 5000", "--n-prompt: 5000 exceeds the model's context of 2048"},
                        Case{"bench-model " + m + " -q -p 0 -n 2048", "--n-gen: 2048 needs 2049 positions"},
                        Case{"bench-model " + m + " -q -p 100 -n 0 -d 2000",
                             "--n-prompt: 100 at --depth 2000 exceeds the model's context of 2048"},
                        Case{"bench-model " + m + " -q -p 0 -n 0 -d 2048",
                             "--depth: 2048 leaves no room for a test in the model's context of 2048"},
                        Case{"run " + m + " --device cuda --stop x -p hi", "--stop: not supported with --device cuda"},
                        Case{"bench-model " + m + " --device cuda --json", "--json: not supported with --device"}}) {
    const Result r = run_nexus(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind(c.says, 0), 0u) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find("Run with --help for more information."), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
  }
}

// Weight and KV types are named in any case: F16, f16 and Q4_0, q4_0 alike.
TEST(CliMain, TypeNamesAreCaseInsensitive) {
  const std::string dir = nexus::test::make_temp_dir();
  for (const auto& [given, type] : std::vector<std::pair<std::string, std::string>>{
           {"f16", "F16"}, {"q4_0", "Q4_0"}, {"Q8_0", "Q8_0"}, {"bf16", "BF16"}}) {
    const std::string out = dir + "/" + given + ".gguf";
    const Result r = run_nexus("synth --dim 64 --layers 1 --heads 4 --ffn 64 --vocab 64 --ctx 64 --type " + given +
                               " -o " + quote(out));
    ASSERT_EQ(r.exit_code, 0) << given << ": " << r.err;
    EXPECT_NE(r.out.find(" M params, " + type + ", dim 64"), std::string::npos) << given << ": " << r.out;
    const Result info = run_nexus("info --no-tensors " + quote(out));
    ASSERT_EQ(info.exit_code, 0) << info.err;
    // token_embd, output and the layer's 7 matrices
    EXPECT_NE(info.out.find(" " + type + " x9"), std::string::npos) << given << ": " << info.out;
  }
  std::filesystem::remove_all(dir);

  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  for (const char* kv : {"Q8_0", "F32", "f16"}) {
    nexus::test::ServeProcess s(model, {"--kv-type", kv, "-c", "64"});
    EXPECT_NE(s.port, 0) << "--kv-type " << kv << " did not start the server";
    EXPECT_EQ(s.proc.stop(SIGTERM), 0) << kv;
  }
}

TEST(CliRun, TruncatedModelFailsClearly) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const std::string dir = nexus::test::make_temp_dir();
  const std::string cut = dir + "/truncated.gguf";
  {
    const std::string bytes = read_file(model);
    std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  Result r = run_nexus("run -m " + quote(cut) + " -p hi");
  std::filesystem::remove_all(dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated.gguf"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(CliRun, BadSamplingParameterIsAUsageError) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  Result r = run_nexus("run -m " + quote(model) + " -n 4 -t 1 --top-p 3 -p hi");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--top-p: 3 is outside 0 to 1"), std::string::npos) << r.err;
}

TEST(CliRun, NonPositiveNPredictNamesTheOption) {
  // Refused by the option parser with the CLI's own name for it (before,
  // the engine said "max_tokens must be positive", the HTTP field's name).
  for (const char* n : {"0", "-1"}) {
    const Result r = run_nexus(std::string("run -p hi -n ") + n);
    EXPECT_NE(r.exit_code, 0) << n;
    EXPECT_NE(r.err.find("--n-predict"), std::string::npos) << n << ": " << r.err;
  }
}

TEST(CliMain, NegativeThreadCountIsRefused) {
  // Refused by the option parser, before any model is read.
  for (const char* cmd : {"run -p hi", "serve", "bench-model", "synth -o /dev/null"}) {
    const Result r = run_nexus(std::string(cmd) + " -t -3");
    EXPECT_NE(r.exit_code, 0) << cmd;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << cmd << ": " << r.err;
  }
}

TEST(CliMain, UnknownSubcommandIsNamed) {
  const Result r = run_nexus("bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown subcommand 'bogus'"), std::string::npos) << r.err;
}

TEST(CliMain, NoArgumentsListsTheSubcommands) {
  const Result r = run_nexus("");
  EXPECT_EQ(r.exit_code, 2);
  for (const char* sub : {"serve", "run", "bench", "info"})
    EXPECT_NE(r.err.find(sub), std::string::npos) << sub << " missing from:\n" << r.err;
}
