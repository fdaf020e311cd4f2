// nexus synth: the files it writes load and run through the real model code,
// weights follow the documented distribution, tokenizer keys are copied
// verbatim, and output is deterministic in the seed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "gguf/gguf_file.h"
#include "kernels/dequant.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "model/synth.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nexus {
namespace {

SynthShape tiny_shape() {
  SynthShape s;
  s.n_embd = 64, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 96, s.n_vocab = 128, s.n_ctx = 32;
  return s;
}

std::string synth_to(const std::string& dir, const SynthOptions& opt, const std::string& name = "m.gguf") {
  const std::string path = dir + "/" + name;
  synth_model(opt, path);
  return path;
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Evaluates a prompt and one decode step; returns the decode logits.
std::vector<float> run_model(const std::string& path) {
  const GgufFile f(path);
  const LlamaModel model(f);
  LlamaContext ctx(model, 16, 2);
  const std::vector<int32_t> prompt = {1, 5, 9, 3};
  std::span<const float> logits = ctx.eval(prompt);
  for (float v : logits) EXPECT_TRUE(std::isfinite(v));
  const int32_t next = 7;
  logits = ctx.eval(std::span(&next, 1));
  return {logits.begin(), logits.end()};
}

void expect_logits_sane(const std::vector<float>& logits) {
  ASSERT_FALSE(logits.empty());
  double sum = 0, sq = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double mean = sum / logits.size(), sd = std::sqrt(sq / logits.size() - mean * mean);
  // Final RMSNorm gives unit RMS and the output rows have std 1/sqrt(n_embd):
  // logits have std ~1 at any depth (far from 0 = all equal, far from blow-up).
  EXPECT_GT(sd, 0.5);
  EXPECT_LT(sd, 2.0);
}

class SynthEachType : public ::testing::TestWithParam<GgmlType> {};

TEST_P(SynthEachType, WritesALoadableModelThatEvaluates) {
  const std::string dir = test::make_temp_dir();
  SynthOptions opt;
  opt.shape = tiny_shape();
  opt.type = GetParam();
  const std::string path = synth_to(dir, opt);

  const GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(*f.get_string("general.architecture"), "llama");
  const int64_t expected_ftype = std::map<GgmlType, int64_t>{
      {GgmlType::F32, 0}, {GgmlType::F16, 1}, {GgmlType::Q4_0, 2}, {GgmlType::Q8_0, 7}, {GgmlType::BF16, 32}}[GetParam()];
  EXPECT_EQ(*f.get_int("general.file_type"), expected_ftype);
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    if (t.ne.size() == 1) EXPECT_EQ(t.type, GgmlType::F32) << t.name;
    else EXPECT_EQ(t.type, GetParam()) << t.name;
  }
  const LlamaModel model(f);
  const LlamaConfig& c = model.config();
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.n_ff, 96);
  EXPECT_EQ(c.n_vocab, 128);
  EXPECT_EQ(c.n_ctx_train, 32);
  EXPECT_EQ(c.n_rot, 16);
  expect_logits_sane(run_model(path));
}

INSTANTIATE_TEST_SUITE_P(Types, SynthEachType,
                         ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

TEST(Synth, DeepModelsStayFiniteTiedOrNot) {
  const std::string dir = test::make_temp_dir();
  for (bool tied : {false, true}) {
    SynthOptions opt;
    opt.shape = tiny_shape();
    opt.shape.n_layer = 24;
    opt.shape.tied = tied;
    opt.type = GgmlType::Q4_0;
    const std::string path = synth_to(dir, opt, tied ? "tied.gguf" : "untied.gguf");
    EXPECT_EQ(GgufFile(path).find_tensor("output.weight") == nullptr, tied);
    expect_logits_sane(run_model(path));
  }
}

TEST(Synth, WeightsFollowTheDocumentedDistribution) {
  SynthOptions opt;
  opt.shape = tiny_shape();
  opt.shape.n_ff = 256;
  const std::string path = synth_to(test::make_temp_dir(), opt);
  const GgufFile f(path);
  auto stats = [&](const char* name, double* mean, double* sd) {
    const TensorInfo* t = f.find_tensor(name);
    const auto* v = reinterpret_cast<const float*>(t->data);
    double s = 0, q = 0;
    const uint64_t n = t->n_elements();
    for (uint64_t i = 0; i < n; ++i) s += v[i], q += static_cast<double>(v[i]) * v[i];
    *mean = s / n;
    *sd = std::sqrt(q / n - *mean * *mean);
  };
  double mean, sd;
  stats("blk.0.attn_q.weight", &mean, &sd);  // fan_in 64: std 1/8
  EXPECT_NEAR(sd, 0.125, 0.125 * 0.05);
  EXPECT_NEAR(mean, 0.0, 0.01);
  stats("blk.1.ffn_down.weight", &mean, &sd);  // fan_in 256: std 1/16
  EXPECT_NEAR(sd, 0.0625, 0.0625 * 0.05);
  stats("token_embd.weight", &mean, &sd);  // std 1/sqrt(n_embd)
  EXPECT_NEAR(sd, 0.125, 0.125 * 0.05);
  const TensorInfo* norm = f.find_tensor("blk.1.ffn_norm.weight");
  for (uint64_t i = 0; i < norm->n_elements(); ++i) ASSERT_EQ(reinterpret_cast<const float*>(norm->data)[i], 1.0f);
}

TEST(Synth, DeterministicInTheSeedWhateverTheThreads) {
  const std::string dir = test::make_temp_dir();
  SynthOptions opt;
  opt.shape = tiny_shape();
  opt.type = GgmlType::Q8_0;
  opt.n_threads = 1;
  const auto a = file_bytes(synth_to(dir, opt, "a.gguf"));
  opt.n_threads = 2;
  const auto b = file_bytes(synth_to(dir, opt, "b.gguf"));
  opt.seed = 2;
  const auto c = file_bytes(synth_to(dir, opt, "c.gguf"));
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(Synth, RowsNotMultipleOfTheBlockFallBackToF16) {
  SynthOptions opt;
  opt.shape = synth_preset("stories260k-shape");  // FFN 172
  opt.shape.n_ctx = 32;
  opt.type = GgmlType::Q8_0;
  const std::string path = test::make_temp_dir() + "/s.gguf";
  const SynthResult r = synth_model(opt, path);
  EXPECT_EQ(r.n_fallback_f16, 5);  // ffn_down of each layer
  const GgufFile f(path);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::F16);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->type, GgmlType::Q8_0);
  expect_logits_sane(run_model(path));
}

TEST(Synth, PresetsHaveTheRealModelsShapes) {
  const SynthShape t = synth_preset("tinyllama-1.1b");
  EXPECT_EQ(t.n_embd, 2048);
  EXPECT_EQ(t.n_layer, 22);
  EXPECT_EQ(t.n_head, 32);
  EXPECT_EQ(t.n_head_kv, 4);
  EXPECT_EQ(t.n_ff, 5632);
  EXPECT_EQ(t.n_vocab, 32000);
  EXPECT_EQ(t.n_ctx, 2048);
  EXPECT_EQ(synth_param_count(t), 1100048384u);  // TinyLlama-1.1B's published count
  const SynthShape l = synth_preset("llama-3.2-1b");
  EXPECT_EQ(l.n_layer, 16);
  EXPECT_EQ(l.n_head_kv, 8);
  EXPECT_EQ(l.n_ff, 8192);
  const SynthShape q = synth_preset("qwen2.5-0.5b");
  EXPECT_EQ(q.n_embd / q.n_head, 64);
  EXPECT_EQ(q.n_head_kv, 2);
  EXPECT_EQ(q.n_ff, 4864);
  EXPECT_EQ(q.n_layer, 24);
  for (const std::string& name : synth_preset_names()) EXPECT_NO_THROW(synth_validate(synth_preset(name))) << name;
  try {
    synth_preset("gpt-5");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tinyllama-1.1b"), std::string::npos);
  }
}

TEST(Synth, RefusesBadShapesAndFilesWithoutAVocabulary) {
  const std::string dir = test::make_temp_dir();
  SynthOptions opt;
  opt.shape = tiny_shape();
  opt.shape.n_head = 5;  // 64 % 5 != 0
  EXPECT_THROW(synth_model(opt, dir + "/bad.gguf"), Error);
  opt.shape = tiny_shape();
  opt.shape.n_head_kv = 3;
  EXPECT_THROW(synth_model(opt, dir + "/bad.gguf"), Error);
  opt.shape = tiny_shape();
  opt.type = GgmlType::Q4_1;
  EXPECT_THROW(synth_model(opt, dir + "/bad.gguf"), Error);
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.gguf"));

  opt.type = GgmlType::F32;
  const std::string no_vocab = synth_to(dir, opt);  // a model without tokenizer keys
  opt.vocab_path = no_vocab;
  EXPECT_THROW(synth_model(opt, dir + "/bad.gguf"), Error);
  opt.vocab_path.clear();
  EXPECT_THROW(synth_model(opt, dir + "/missing/dir/x.gguf"), Error);
}

TEST(Synth, CopiesEveryTokenizerKeyFromTheVocabularyFile) {
  NEXUS_REQUIRE_SHARED(vocab_path, "tokenizers/ggml-vocab-llama-spm.gguf");
  SynthOptions opt;
  opt.shape = tiny_shape();
  opt.shape.n_embd = 32, opt.shape.n_head = 2, opt.shape.n_head_kv = 1, opt.shape.n_ff = 64, opt.shape.n_layer = 1;
  opt.type = GgmlType::Q8_0;
  opt.vocab_path = vocab_path;
  const std::string path = test::make_temp_dir() + "/v.gguf";
  const SynthResult r = synth_model(opt, path);
  EXPECT_EQ(r.shape.n_vocab, 32000);

  const GgufFile src(vocab_path), out(path);
  size_t n_keys = 0;
  for (const auto& [key, v] : src.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ++n_keys;
    const GgufValue* w = out.find(key);
    ASSERT_NE(w, nullptr) << key;
    EXPECT_EQ(w->type, v.type) << key;
    if (v.type == GgufValueType::ARRAY) {
      const GgufArray& a = *std::get<std::shared_ptr<GgufArray>>(v.v);
      const GgufArray& b = *std::get<std::shared_ptr<GgufArray>>(w->v);
      EXPECT_EQ(b.elem_type, a.elem_type) << key;
      EXPECT_EQ(b.strings, a.strings) << key;
      EXPECT_EQ(b.ints, a.ints) << key;
      EXPECT_EQ(b.floats, a.floats) << key;
    } else {
      EXPECT_EQ(w->v, v.v) << key;
    }
  }
  EXPECT_GE(n_keys, 5u);  // tokens, scores, token_type, model, bos/eos ids at least
  EXPECT_EQ(out.get_array("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(*out.get_int("llama.vocab_size"), 32000);
  const LlamaModel model(out);
  EXPECT_EQ(model.config().n_vocab, 32000);
}

// --arch: each family's tensors and keys, as the loader reads them.
class SynthEachFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthEachFamily, WritesTheFamilysTensorsAndKeysAndEvaluates) {
  const std::string arch = GetParam();
  SynthOptions opt;
  opt.shape = tiny_shape();
  if (arch == "qwen3" || arch == "gemma2") opt.shape.head_dim = 32;  // explicit key_length (Q wider than n_embd)
  synth_set_arch(opt.shape, arch);
  if (arch == "gemma2" || arch == "gemma3") opt.shape.n_swa = 3;  // shorter than the prompt: the window matters
  opt.type = GgmlType::Q8_0;
  const std::string path = synth_to(test::make_temp_dir(), opt);

  const GgufFile f(path);
  EXPECT_EQ(*f.get_string("general.architecture"), arch);
  const LlamaModel model(f);  // refuses missing, misshapen and unused tensors
  const LlamaConfig& c = model.config();
  EXPECT_EQ(c.arch, arch);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, opt.shape.head_size());
  EXPECT_EQ(synth_param_count(opt.shape), [&] {
    uint64_t n = 0;
    for (const TensorInfo& t : f.tensors()) n += t.n_elements();
    return n;
  }());
  auto has = [&](const char* name) { return f.find_tensor(name) != nullptr; };
  const std::string d = model.describe();
  if (arch == "qwen2") {
    EXPECT_TRUE(has("blk.1.attn_q.bias") && has("blk.1.attn_k.bias") && has("blk.1.attn_v.bias"));
    EXPECT_NE(d.find("Q/K/V biases"), std::string::npos) << d;
  } else if (arch == "qwen3") {
    EXPECT_EQ(*f.get_int("qwen3.attention.key_length"), 32);
    EXPECT_TRUE(has("blk.0.attn_q_norm.weight") && has("blk.0.attn_k_norm.weight"));
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->ne[1], 128u);  // 4 heads of 32
  } else if (arch == "phi3") {
    EXPECT_TRUE(has("blk.0.attn_qkv.weight"));
    EXPECT_FALSE(has("blk.0.attn_q.weight") || has("blk.0.ffn_gate.weight"));
    EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->ne[1], 2u * 96);  // gate rows, then up rows
    EXPECT_NE(d.find("fused attn_qkv, fused gate+up"), std::string::npos) << d;
  } else if (arch == "gemma2") {
    EXPECT_TRUE(has("blk.0.post_attention_norm.weight") && has("blk.0.post_ffw_norm.weight"));
    EXPECT_EQ(c.attn_softcap, 50.0f);
    EXPECT_EQ(c.final_softcap, 30.0f);
    EXPECT_EQ(c.n_swa, 3);
    EXPECT_TRUE(c.is_swa(0) && !c.is_swa(1));
  } else if (arch == "gemma3") {
    EXPECT_TRUE(has("blk.0.attn_q_norm.weight") && has("blk.0.post_ffw_norm.weight"));
    EXPECT_EQ(c.n_swa, 3);
  } else if (arch == "starcoder2") {
    EXPECT_TRUE(has("blk.0.attn_norm.bias") && has("blk.0.ffn_up.bias") && has("output_norm.bias"));
    EXPECT_FALSE(has("blk.0.ffn_gate.weight"));
    EXPECT_TRUE(f.get_float("starcoder2.attention.layer_norm_epsilon").has_value());
    const TensorInfo* b = f.find_tensor("blk.0.ffn_down.bias");
    for (uint64_t i = 0; i < b->n_elements(); ++i) ASSERT_EQ(reinterpret_cast<const float*>(b->data)[i], 0.0f);
    EXPECT_NE(d.find("LayerNorm, GELU MLP"), std::string::npos) << d;
  }
  expect_logits_sane(run_model(path));
}

INSTANTIATE_TEST_SUITE_P(Families, SynthEachFamily,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3",
                                           "starcoder2"));

TEST(Synth, ArchNamesAreTheLoadersFamilies) {
  const auto& names = synth_arch_names();
  EXPECT_EQ(names.size(), 8u);
  for (const std::string& n : names) EXPECT_NE(find_arch(n), nullptr) << n;
  SynthShape s = tiny_shape();
  EXPECT_THROW(synth_set_arch(s, "gpt2"), Error);
  synth_set_arch(s, "gemma2");
  EXPECT_EQ(s.n_swa, 4096);
  synth_set_arch(s, "llama");  // a change of family drops gemma2's window and caps
  EXPECT_EQ(s.n_swa, 0);
  EXPECT_EQ(s.attn_softcap, 0.0f);
}

TEST(Synth, FamilyPresetsHaveTheRealModelsShapes) {
  const std::map<std::string, std::pair<std::string, uint64_t>> expected = {
      // family, published parameter count (qwen3-1.7b: the model card's 1.4B
      // non-embedding plus the tied 151936 x 2048 embedding)
      {"qwen2.5-1.5b", {"qwen2", 1543714304u}},  {"qwen3-1.7b", {"qwen3", 1720574976u}},
      {"phi3-mini", {"phi3", 3821079552u}},      {"gemma2-2b", {"gemma2", 2614341888u}},
      {"gemma3-1b", {"gemma3", 999885952u}},     {"starcoder2-3b", {"starcoder2", 3030371328u}},
  };
  for (const auto& [name, want] : expected) {
    const SynthShape s = synth_preset(name);
    EXPECT_EQ(s.arch, want.first) << name;
    EXPECT_NO_THROW(synth_validate(s)) << name;
    EXPECT_EQ(synth_param_count(s), want.second) << name;
  }
  const SynthShape g = synth_preset("gemma2-2b");
  EXPECT_EQ(g.head_size(), 256);
  EXPECT_EQ(g.n_swa, 4096);
  EXPECT_EQ(g.attn_softcap, 50.0f);
  EXPECT_EQ(synth_preset("tinyllama-1.1b").arch, "llama");
}

// The command: --arch in any case, `nexus info` names the family, `nexus run` generates.
TEST(SynthCli, EachFamilyRunsThroughInfoAndRun) {
  NEXUS_REQUIRE_SHARED(vocab, "tokenizers/ggml-vocab-llama-spm.gguf");
  const std::string dir = test::make_temp_dir();
  for (const std::string arch : {"llama", "Qwen2", "qwen3", "PHI3", "gemma2", "gemma3", "starcoder2"}) {
    std::string lower = arch;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const std::string out = dir + "/" + lower + ".gguf";
    const test::CommandResult w =
        test::run_nexus("synth --arch " + arch + " --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 --ctx 64 " +
                        "--type Q8_0 --vocab-from " + test::shell_quote(vocab) + " -o " + test::shell_quote(out));
    ASSERT_EQ(w.exit_code, 0) << arch << ": " << w.err;
    EXPECT_NE(w.out.find("(" + lower + ")"), std::string::npos) << w.out;
    const test::CommandResult info = test::run_nexus("info --no-tensors " + test::shell_quote(out));
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("\"" + lower + "\""), std::string::npos) << info.out;  // general.architecture
    EXPECT_NE(info.out.find("model: " + lower + ": 2 layers"), std::string::npos) << info.out;
    const test::CommandResult run =
        test::run_nexus("run -m " + test::shell_quote(out) + " -n 4 --temp 0 -t 1 --ignore-eos -p hello");
    ASSERT_EQ(run.exit_code, 0) << arch << ": " << run.err;
    EXPECT_NE(run.err.find("generation: 4 tokens"), std::string::npos) << arch << ": " << run.err;
  }
  std::filesystem::remove_all(dir);
}

TEST(SynthCli, UnknownArchIsAUsageErrorListingTheFamilies) {
  const test::CommandResult r = test::run_nexus("synth --arch gpt2 --preset tinyllama-1.1b -o /dev/null");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown architecture 'gpt2'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("llama|mistral|qwen2|qwen3|phi3|gemma2|gemma3|starcoder2"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace nexus
