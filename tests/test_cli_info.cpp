// `nexus info`: runs the built binary on the shared models, the edge files, a
// truncated copy and a missing file; checks exit status, stdout and stderr.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/test_support.h"

namespace {

using RunResult = nexus::test::CommandResult;

// Runs `nexus info <args>` with stdout and stderr captured separately.
RunResult run_info(const std::string& args) { return nexus::test::run_nexus("info " + args); }

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

TEST(CliInfo, Stories260K) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  const RunResult r = run_info("'" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(contains(r.out, "GGUF version: 3\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "alignment:    32\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "metadata (19 entries):")) << r.out;
  EXPECT_TRUE(contains(r.out, "  llama.block_count                       UINT32   5\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "FLOAT32  1e-05\n")) << r.out;
  // The 512-token vocabulary is abbreviated, not dumped.
  EXPECT_TRUE(contains(r.out, "[512 x STRING] [\"<unk>\", \"<s>\", \"</s>\",")) << r.out;
  EXPECT_FALSE(contains(r.out, "<0x10>")) << r.out;
  EXPECT_TRUE(contains(r.out, "tensors (48):")) << r.out;
  EXPECT_TRUE(contains(r.out, "  token_embd.weight         F32    [64, 512]        131072         14176\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "blk.4.ffn_down.weight     F32    [172, 64]")) << r.out;
  EXPECT_TRUE(contains(r.out, "summary: 48 tensors, 292800 parameters (292.80 K), 1171200 bytes of tensor data"))
      << r.out;
}

// -m names the file as run, serve and tokenize take it. Not the default
// model (stories260K), so an ignored -m would show in the output.
TEST(CliInfo, ModelOptionEqualsThePositionalFile) {
  NEXUS_REQUIRE_SHARED(path, "TinyLLama-v0.Q8_0.gguf");
  const RunResult a = run_info("--no-tensors '" + path + "'");
  const RunResult b = run_info("--no-tensors -m '" + path + "'");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(contains(b.out, "TinyLLama-v0.Q8_0.gguf")) << b.out;
  EXPECT_EQ(a.out, b.out);
}

TEST(CliInfo, ArrayItemsAndNoTensorsOptions) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  const RunResult r = run_info("--array-items 2 --no-tensors '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[512 x STRING] [\"<unk>\", \"<s>\", ...]\n")) << r.out;
  EXPECT_FALSE(contains(r.out, "tensors (48):")) << r.out;
  EXPECT_TRUE(contains(r.out, "summary: 48 tensors")) << r.out;
}

TEST(CliInfo, QuantizedModelTypes) {
  NEXUS_REQUIRE_SHARED(path, "TinyLLama-v0.Q8_0.gguf");
  const RunResult r = run_info("'" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[32000 x STRING]")) << r.out;
  EXPECT_TRUE(contains(r.out, "types: F32 x17, Q8_0 x58\n")) << r.out;
}

TEST(CliInfo, Version1EdgeFile) {
  NEXUS_REQUIRE_SHARED(path, "edge/stories260K.gguf-v1.gguf");
  const RunResult r = run_info("'" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "GGUF version: 1\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"tinyllamas-stories-260k\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "summary: 48 tensors, 292800 parameters")) << r.out;
}

TEST(CliInfo, Row172EdgeFileFailsWithMessage) {
  NEXUS_REQUIRE_SHARED(path, "edge/stories260K.q8_0-row172.gguf");
  const RunResult r = run_info("'" + path + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(contains(r.err, "nexus: error: " + path + ": tensor info 6 ('blk.0.ffn_down.weight'): row length 172"))
      << r.err;
}

TEST(CliInfo, TruncatedCopyFails) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  const std::string dir = nexus::test::make_temp_dir(), cut = dir + "/cut.gguf";
  const std::string full = nexus::test::read_file(path);
  std::ofstream(cut, std::ios::binary).write(full.data(), 20000);  // header intact, tensor data cut
  const RunResult r = run_info("'" + cut + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(contains(r.err, cut + ": truncated file: tensor 'token_embd.weight'")) << r.err;
  std::ofstream(cut, std::ios::binary).write(full.data(), 5000);  // cut inside the vocabulary
  const RunResult r2 = run_info("'" + cut + "'");
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_TRUE(contains(r2.err, "truncated")) << r2.err;
  EXPECT_TRUE(contains(r2.err, "('tokenizer.ggml.tokens')")) << r2.err;
  std::filesystem::remove_all(dir);
}

TEST(CliInfo, MissingFileFails) {
  const RunResult r = run_info("/nonexistent/model.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "model file not found: /nonexistent/model.gguf")) << r.err;
}

}  // namespace

// general.file_type is shown by its llama-quantize name, and the tensor
// types of a K-quant mix are listed.
TEST(CliInfo, NamesTheFileTypeOfAQuantizedModel) {
  NEXUS_REQUIRE_SHARED(path, "arch/llama-d256-Q4_K_M.gguf");
  const RunResult r = run_info("-m '" + path + "' --no-tensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "file type: Q4_K_M (general.file_type 15)\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "types: F32 x9, Q4_K x")) << r.out;
  EXPECT_TRUE(contains(r.out, "Q6_K x")) << r.out;
}
