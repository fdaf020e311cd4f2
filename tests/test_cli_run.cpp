// `nexus run` end to end: the built binary on stories260K, and its errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

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
  // "Once upon a time" is 5 tokens with BOS: 32 - 5 + 1 = 28 fit.
  EXPECT_NE(r.err.find("note: -n 100: the 5-token prompt leaves room for 28 tokens in the 32-token context"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("generation: 28 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("finish:     length"), std::string::npos) << r.err;
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

TEST(CliRun, BadSamplingParameterFails) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  Result r = run_nexus("run -m " + quote(model) + " -n 4 -t 1 --top-p 3 -p hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("top_p"), std::string::npos) << r.err;
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
