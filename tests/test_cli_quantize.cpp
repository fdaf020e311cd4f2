// `nexus quantize` end to end: the built binary on the shared llama-d256
// model. For every type llama.cpp wrote a file of (arch/llama-d256-TYPE.gguf,
// llama-quantize without an importance matrix, February 2025 build), ours
// has the same metadata, the same tensors in the same order with the same
// types and the same bytes; it generates the same text in `nexus run`; and
// its KL divergence from the F32 original is llama.cpp's file's. Mixes
// without a llama.cpp file are checked against the rules (model/quant_mix.h)
// and quantize_row_ref; then overrides, fallbacks and the errors.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/dequant.h"
#include "model/quantize_ref.h"
#include "support/test_support.h"

namespace {

using nexus::test::number_after;

using nexus::GgmlType;
using nexus::GgufFile;
using nexus::TensorInfo;
using Result = nexus::test::CommandResult;
using nexus::test::run_nexus;
const auto quote = nexus::test::shell_quote;

// A temporary directory, removed at the end of the test.
struct TempDir {
  TempDir() : path(nexus::test::make_temp_dir()) {}
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

std::string story_path() { return std::string(NEXUS_SOURCE_DIR) + "/tests/data/quantize-story.txt"; }

// Mean KLD of `model` from `base` over the first chunks of the story.
double mean_kld(const std::string& model, const std::string& base) {
  const Result r = run_nexus("perplexity -m " + quote(model) + " -f " + quote(story_path()) +
                             " -c 128 --chunks 4 -t 2 --kl-divergence-base " + quote(base));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return number_after(r.out, "Mean    KLD:");
}

// The greedy continuation `nexus run` prints.
std::string greedy(const std::string& model) {
  const Result r = run_nexus("run -m " + quote(model) + " --temp 0 -n 24 -t 1 -p 'Once upon a time'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

Result quantize(const std::string& in, const std::string& out, const std::string& args) {
  return run_nexus("quantize " + quote(in) + " " + quote(out) + " " + args);
}

std::map<std::string, GgmlType> types_of(const GgufFile& f) {
  std::map<std::string, GgmlType> m;
  for (const TensorInfo& t : f.tensors()) m[t.name] = t.type;
  return m;
}

class QuantizeLikeLlamaCpp : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeLikeLlamaCpp, SameFileContentsAsLlamaQuantize) {
  NEXUS_REQUIRE_SHARED(f32, "arch/llama-d256-F32.gguf");
  NEXUS_REQUIRE_SHARED(theirs_path, std::string("arch/llama-d256-") + GetParam() + ".gguf");
  const TempDir dir;
  const std::string ours_path = dir / "ours.gguf";
  const Result r = quantize(f32, ours_path, GetParam() + std::string(" -t 2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("30 tensors converted, 9 copied"), std::string::npos) << r.out;

  {
    const GgufFile ours(ours_path), theirs(theirs_path);
    // Metadata: llama.cpp's keys in its order, equal values; ours adds only
    // general.alignment (llama.cpp leaves the default of 32 implicit).
    std::vector<std::pair<std::string, std::string>> want, got;
    for (const auto& [k, v] : theirs.metadata()) want.emplace_back(k, nexus::gguf_value_to_string(v, 1 << 20));
    for (const auto& [k, v] : ours.metadata())
      if (k != "general.alignment") got.emplace_back(k, nexus::gguf_value_to_string(v, 1 << 20));
    EXPECT_EQ(got, want);
    EXPECT_EQ(ours.alignment(), 32u);

    ASSERT_EQ(ours.tensors().size(), theirs.tensors().size());
    for (size_t i = 0; i < theirs.tensors().size(); ++i) {
      const TensorInfo& a = ours.tensors()[i];
      const TensorInfo& b = theirs.tensors()[i];
      ASSERT_EQ(a.name, b.name) << "tensor " << i;
      EXPECT_EQ(a.type, b.type) << a.name;
      EXPECT_EQ(a.ne, b.ne) << a.name;
      ASSERT_EQ(a.n_bytes, b.n_bytes) << a.name;
      EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name << ": bytes differ from llama.cpp's";
      EXPECT_EQ(a.offset % 32, 0u) << a.name;
    }
  }
  // Same bytes, so the same generation and the same KL divergence.
  const std::string text = greedy(ours_path);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, greedy(theirs_path));
  const double kl_ours = mean_kld(ours_path, f32), kl_theirs = mean_kld(theirs_path, f32);
  EXPECT_GT(kl_theirs, 0.0);
  EXPECT_LE(kl_ours, 1.1 * kl_theirs) << "ours " << kl_ours << ", llama.cpp's " << kl_theirs;
}

INSTANTIATE_TEST_SUITE_P(SharedFiles, QuantizeLikeLlamaCpp,
                         ::testing::Values("Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "Q4_1", "Q5_0", "Q5_1",
                                           "IQ4_NL", "IQ4_XS", "Q8_0", "Q4_0", "F16", "BF16"),
                         [](const auto& info) { return std::string(info.param); });

// The mixes with no llama.cpp file: types as llama_tensor_get_type gives
// them for 4 layers and GQA 2 (n/8 = 0, so no first-eighth rules), bytes as
// quantize_row_ref writes the F32 rows.
struct MixCase {
  const char* mix;
  int64_t ftype;  // LLAMA_FTYPE_MOSTLY_*
  GgmlType base, attn_v, ffn_down, attn_output;
};

class QuantizeOtherMixes : public ::testing::TestWithParam<MixCase> {};

TEST_P(QuantizeOtherMixes, TypesFollowTheRulesAndRun) {
  NEXUS_REQUIRE_SHARED(f32_path, "arch/llama-d256-F32.gguf");
  const MixCase c = GetParam();
  const TempDir dir;
  const std::string out = dir / "out.gguf";
  const Result r = quantize(f32_path, out, c.mix);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    const GgufFile f32(f32_path), q(out);
    for (const TensorInfo& t : q.tensors()) {
      GgmlType want = c.base;
      if (t.ne.size() == 1) want = GgmlType::F32;
      else if (t.name == "output.weight") want = GgmlType::Q6_K;
      else if (t.name.find("attn_v.weight") != std::string::npos) want = c.attn_v;
      else if (t.name.find("ffn_down") != std::string::npos) want = c.ffn_down;
      else if (t.name.find("attn_output") != std::string::npos) want = c.attn_output;
      EXPECT_EQ(t.type, want) << c.mix << " " << t.name;
      const TensorInfo* src = f32.find_tensor(t.name);
      ASSERT_NE(src, nullptr);
      std::vector<uint8_t> row(nexus::ggml_row_size(t.type, t.ne[0]));
      for (uint64_t i = 0; i < t.n_rows(); ++i) {
        nexus::quantize_row_ref(t.type, reinterpret_cast<const float*>(src->data) + i * t.ne[0], row.data(),
                                static_cast<int64_t>(t.ne[0]));
        ASSERT_EQ(std::memcmp(row.data(), t.data + i * row.size(), row.size()), 0) << t.name << " row " << i;
      }
    }
    EXPECT_EQ(q.get_int("general.file_type"), c.ftype);
  }
  EXPECT_FALSE(greedy(out).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Rules, QuantizeOtherMixes,
    ::testing::Values(MixCase{"Q3_K_S", 11, GgmlType::Q3_K, GgmlType::Q3_K, GgmlType::Q3_K, GgmlType::Q3_K},
                      MixCase{"Q3_K_L", 13, GgmlType::Q3_K, GgmlType::Q5_K, GgmlType::Q5_K, GgmlType::Q5_K},
                      MixCase{"Q4_K_S", 14, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q4_K, GgmlType::Q4_K},
                      MixCase{"Q5_K_S", 16, GgmlType::Q5_K, GgmlType::Q5_K, GgmlType::Q5_K, GgmlType::Q5_K}),
    [](const auto& info) { return std::string(info.param.mix); });

}  // namespace

// stories260K: dim 64, FFN 172, 5 layers. No row is a multiple of 256, and
// ffn_down's 172 is not even one of 32.
TEST(CliQuantize, RowFallbacksOnStories260K) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const TempDir dir;
  const std::string out = dir / "q4km.gguf";
  const Result r = quantize(model, out, "Q4_K_M");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rows of 172 are not a multiple of the Q4_K block of 256: F16 instead, for 3 tensors "
                       "(blk.0.ffn_down.weight, blk.1.ffn_down.weight, blk.3.ffn_down.weight)"),
            std::string::npos)
      << r.err;
  {
    const GgufFile q(out);
    for (const TensorInfo& t : q.tensors()) {
      GgmlType want = GgmlType::Q5_0;  // Q4_K's fallback for rows of 64
      if (t.ne.size() == 1) want = GgmlType::F32;
      else if (t.name == "output.weight") want = GgmlType::Q8_0;  // rows not a multiple of 256
      else if (t.name.find("ffn_down") != std::string::npos) want = GgmlType::F16;
      // use_more_bits(i, 5): layers 2 and 4 get Q6_K, whose fallback is Q8_0.
      else if (t.name == "blk.2.attn_v.weight" || t.name == "blk.4.attn_v.weight") want = GgmlType::Q8_0;
      EXPECT_EQ(t.type, want) << t.name;
    }
  }
  EXPECT_FALSE(greedy(out).empty());
}

TEST(CliQuantize, OverridesAndThreadCount) {
  NEXUS_REQUIRE_SHARED(f32, "arch/llama-d256-F32.gguf");
  NEXUS_REQUIRE_SHARED(ref, "arch/llama-d256-Q4_K_M.gguf");
  const TempDir dir;
  const Result r = quantize(f32, dir / "a.gguf", "q4_k_m --output-type q8_0 --token-embedding-type F16 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Not a terminal: one line per tensor.
  EXPECT_NE(r.out.find("output.weight                        F32    -> Q8_0"), std::string::npos) << r.out;
  {
    const GgufFile a(dir / "a.gguf"), theirs(ref);
    std::map<std::string, GgmlType> want = types_of(theirs);
    want["output.weight"] = GgmlType::Q8_0;
    want["token_embd.weight"] = GgmlType::F16;
    EXPECT_EQ(types_of(a), want);
  }
  EXPECT_FALSE(greedy(dir / "a.gguf").empty());
  // Rows are independent: any thread count writes the same file.
  ASSERT_EQ(quantize(f32, dir / "b.gguf", "Q4_K_M -t 1").exit_code, 0);
  ASSERT_EQ(quantize(f32, dir / "c.gguf", "Q4_K_M -t 2").exit_code, 0);
  EXPECT_EQ(nexus::test::read_file(dir / "b.gguf"), nexus::test::read_file(dir / "c.gguf"));
}

// F16 and BF16 inputs are widened exactly: to F32 they give back
// dequantize_row's floats, and to Q8_0 what quantize_row_ref makes of those.
TEST(CliQuantize, HalfPrecisionInputs) {
  for (const char* type : {"F16", "BF16"}) {
    NEXUS_REQUIRE_SHARED(half, std::string("arch/llama-d256-") + type + ".gguf");
    const TempDir dir;
    for (const char* target : {"F32", "Q8_0"}) {
      const Result r = quantize(half, dir / "out.gguf", target);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.err.find("requantizing"), std::string::npos) << r.err;
      const GgufFile in(half), out(dir / "out.gguf");
      const GgmlType want = target == std::string("F32") ? GgmlType::F32 : GgmlType::Q8_0;
      for (const TensorInfo& t : out.tensors()) {
        const TensorInfo& src = *in.find_tensor(t.name);
        if (t.ne.size() == 1) {
          EXPECT_EQ(t.type, src.type) << t.name;
          continue;
        }
        ASSERT_EQ(t.type, want) << type << " -> " << target << " " << t.name;
        std::vector<float> x(t.ne[0]);
        std::vector<uint8_t> row(nexus::ggml_row_size(want, t.ne[0]));
        const size_t src_row = nexus::ggml_row_size(src.type, t.ne[0]);
        for (uint64_t i = 0; i < t.n_rows(); ++i) {
          nexus::dequantize_row(src.type, src.data + i * src_row, x.data(), static_cast<int64_t>(t.ne[0]));
          nexus::quantize_row_ref(want, x.data(), row.data(), static_cast<int64_t>(t.ne[0]));
          ASSERT_EQ(std::memcmp(row.data(), t.data + i * row.size(), row.size()), 0)
              << type << " -> " << target << " " << t.name << " row " << i;
        }
      }
    }
  }
}

TEST(CliQuantize, QuantizedInputNeedsAllowRequantize) {
  NEXUS_REQUIRE_SHARED(q4km, "arch/llama-d256-Q4_K_M.gguf");
  const TempDir dir;
  const std::string out = dir / "out.gguf";
  std::ofstream(out) << "old";
  const Result refused = quantize(q4km, out, "Q8_0");
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("is already quantized (output.weight is Q6_K, and 30 quantized tensors"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("pass --allow-requantize"), std::string::npos) << refused.err;
  EXPECT_EQ(nexus::test::read_file(out), "old");  // untouched
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));

  const Result r = quantize(q4km, out, "Q8_0 --allow-requantize");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: requantizing 30 tensors that are already quantized"), std::string::npos) << r.err;
  {
    const GgufFile in(q4km), q(out);
    for (const TensorInfo& t : q.tensors()) {
      EXPECT_EQ(t.type, t.ne.size() == 1 ? GgmlType::F32 : GgmlType::Q8_0) << t.name;
      if (t.ne.size() == 1) continue;
      // Dequantized as the kernels read it, then quantized again.
      const TensorInfo& src = *in.find_tensor(t.name);
      std::vector<float> x(t.ne[0]);
      std::vector<uint8_t> row(nexus::ggml_row_size(GgmlType::Q8_0, t.ne[0]));
      const size_t src_row = nexus::ggml_row_size(src.type, t.ne[0]);
      for (uint64_t i = 0; i < t.n_rows(); ++i) {
        nexus::dequantize_row(src.type, src.data + i * src_row, x.data(), static_cast<int64_t>(t.ne[0]));
        nexus::quantize_row_ref(GgmlType::Q8_0, x.data(), row.data(), static_cast<int64_t>(t.ne[0]));
        ASSERT_EQ(std::memcmp(row.data(), t.data + i * row.size(), row.size()), 0) << t.name << " row " << i;
      }
    }
  }
  EXPECT_FALSE(greedy(out).empty());

  // The file's own mix converts nothing, so needs no permission: a copy.
  const Result same = quantize(q4km, dir / "same.gguf", "Q4_K_M");
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("0 tensors converted, 39 copied"), std::string::npos) << same.out;
}

TEST(CliQuantize, BadInputsFailClearly) {
  NEXUS_REQUIRE_SHARED(f32, "arch/llama-d256-F32.gguf");
  NEXUS_REQUIRE_SHARED(stories, "stories260K.gguf");
  const TempDir dir;
  const std::string out = dir / "out.gguf";
  struct Case {
    std::string args;
    int exit_code;
    std::string says;
  };
  for (const Case& c : {
           Case{"quantize " + quote(f32) + " " + quote(out) + " Q4_K_X", 2,
                "unknown type 'Q4_K_X' (valid: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, "
                "Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS)"},
           Case{"quantize " + quote(f32) + " " + quote(out) + " Q4_K", 2, "unknown type 'Q4_K'"},
           Case{"quantize " + quote(f32) + " " + quote(out), 2, "type is required"},
           Case{"quantize " + quote(f32) + " " + quote(out) + " Q4_0 --output-type Q9_9", 2,
                "unknown tensor type 'Q9_9'"},
           Case{"quantize " + quote(f32) + " " + quote(out) + " Q4_0 -t -1", 2, "-1 is outside 0 to 4096"},
           Case{"quantize " + quote(dir / "absent.gguf") + " " + quote(out) + " Q4_0", 1,
                "input model file not found: " + dir / "absent.gguf"},
           Case{"quantize " + quote(f32) + " " + quote(dir / "no/such/dir/out.gguf") + " Q4_0", 1,
                "folder " + dir / "no/such/dir" + " does not exist"},
           Case{"quantize " + quote(f32) + " " + quote(f32 + "/out.gguf") + " Q4_0", 1, "does not exist"},
           Case{"quantize " + quote(f32) + " " + quote(dir.path) + " Q4_0", 1, "it is a folder"},
           Case{"quantize " + quote(stories) + " " + quote(out) + " Q4_K_M --output-type Q4_K", 1,
                "--output-type Q4_K: output.weight has rows of 64 values, not a multiple of the Q4_K block of 256"},
       }) {
    const Result r = run_nexus(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
  // Nothing was left behind: no half-written file, no temporary.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path));

  // OUT naming the input itself (by any path) would replace the only copy.
  const std::string own = dir / "own.gguf";
  std::filesystem::copy_file(f32, own);
  const std::string before = nexus::test::read_file(own);
  for (const std::string& same : {own, dir.path + "/./own.gguf"}) {
    const Result r = run_nexus("quantize " + quote(own) + " " + quote(same) + " Q4_K_M");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
  }
  EXPECT_EQ(nexus::test::read_file(own), before);
}
