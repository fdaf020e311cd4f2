// `nexus tokenize`, run as a subprocess of the built binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/test_support.h"

namespace nexus {
namespace {

struct Result {
  int status;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args, const std::string& stdin_text = "") {
  const test::CommandResult r = test::run_nexus(args, stdin_text);
  return {r.exit_code, r.out + r.err};
}

TEST(CliTokenize, PrintsIdsAndPiecesOfTheReferencePrompt) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  // Prompt ids from reference/stories260K__Once_upon_a_time.json.
  const Result r = run("tokenize -m '" + model + "' 'Once upon a time'");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "1\t'<s>'\n403\t' Once'\n407\t' upon'\n261\t' a'\n378\t' time'\n");
}

TEST(CliTokenize, IdsOnlyNoBosAndDefaultModel) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  EXPECT_EQ(run("tokenize --ids-only 'Once upon a time'").out, "1 403 407 261 378\n");
  EXPECT_EQ(run("tokenize --ids-only --no-bos -m '" + model + "' 'Once upon a time'").out,
            "403 407 261 378\n");
}

TEST(CliTokenize, ReadsStdinAndEscapesPieces) {
  NEXUS_REQUIRE_SHARED(model, "tokenizers/ggml-vocab-llama-spm.gguf");
  const Result r = run("tokenize --no-bos -m '" + model + "'", "it's\t\xF0\x9F\xA6\x99\n");
  ASSERT_EQ(r.status, 0) << r.out;
  // The quote and tab are escaped; the emoji's byte tokens print as \xNN.
  EXPECT_NE(r.out.find("\t'\\''\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\t'\\t'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\t'\\xf0'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\t'\\n'\n"), std::string::npos) << r.out;  // stdin's final newline is kept
}

TEST(CliTokenize, SpecialFlagParsesControlTokens) {
  NEXUS_REQUIRE_SHARED(model, "tokenizers/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(run("tokenize --ids-only --special -m '" + model + "' 'a<|endoftext|>'").out,
            "64 50256\n");
  EXPECT_NE(run("tokenize --ids-only -m '" + model + "' 'a<|endoftext|>'").out, "64 50256\n");
  EXPECT_EQ(run("tokenize --special -m '" + model + "' '<|endoftext|>'").out,
            "50256\t'<|endoftext|>'\n");
}

TEST(CliTokenize, BadModelIsAnErrorNotACrash) {
  const Result r = run("tokenize -m /nonexistent/model.gguf hello");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("nexus: error:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace nexus
