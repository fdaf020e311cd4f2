// Model families against llama.cpp: ../shared/models/arch/FAMILY-*.gguf are
// random-weight models in each family's exact tensor layout, and their
// .ref.json llama.cpp's greedy ids and logits (arch/README.md). The method
// and the quantized tolerances are test_arch_reference.cpp's (its header
// says why): teacher-forced logits of all 32 steps in one batch, compared by
// RMS and largest difference; free-running greedy ids, which for the F32
// files must equal llama.cpp's for all 32 steps.
//
// phi3 LongRoPE: copies of the phi3 file with rope_factors_long/short
// tensors: factors of 1 leave llama.cpp's logits, the context chooses the
// set, the RoPE table matches the definition in float64.
//
// Bad input: copies of a family file with one tensor dropped, one tensor's
// shape changed, or an unknown RoPE scaling type must be refused with a
// message naming what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/llama_context.h"
#include "model/cpu_ops.h"
#include "model/llama_model.h"
#include "support/arch_ref.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace nexus;
using namespace nexus::test;

namespace {

struct Case {
  std::string file;  // arch/<file>.gguf and .ref.json
  std::string arch;  // general.architecture it must load as
  double rms_tol;    // bound on the RMS logit difference from llama.cpp's logits of the same file
  bool exact_greedy; // F32: every greedy id equal
};

// F32: float32 rounding (test_arch_reference's llama F32 bound). Q4_K_M:
// test_arch_reference's bound for the type (8-bit activation rounding on
// both sides, far below the weight-quantization noise).
// gemma2-d64 amplifies rounding: 26 layers whose post-norm weights are ~20
// (arch/README.md). On it Nexus's own logits with an F16 KV cache (llama.cpp's
// default, which made the reference) differ from its F32-cache logits by
// 0.0066 RMS, and its distance from llama.cpp is of that size (0.0080 with
// the F32 cache, 0.0061 with F16): the bound is 1.5x that. Its Q8_0 file
// measured 0.227 RMS, below llama.cpp's own F32-vs-Q8_0 difference on the
// same prompt (0.36 RMS, logit std 7.4) but not far below it: the bound is
// 1.5x the measurement, and the gap is worth a closer look (issue 20).
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"llama3rope-d256-F32", "llama", 1.5e-3, true},
      {"qwen2-d256-F32", "qwen2", 1.5e-3, true},
      {"qwen2-d256-Q4_K_M", "qwen2", 0.14, false},
      {"phi3-d256-F32", "phi3", 1.5e-3, true},
      {"phi3-d256-Q4_K_M", "phi3", 0.14, false},
      {"starcoder2-d256-F32", "starcoder2", 1.5e-3, true},
      {"gemma2-d64-F32", "gemma2", 0.012, true},
      {"gemma2-d64-Q8_0", "gemma2", 0.35, false},
  };
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.file; }

class ArchFamily : public ::testing::TestWithParam<Case> {};

TEST_P(ArchFamily, MatchesLlamaCppLogitsAndGreedyIds) {
  const Case& c = GetParam();
  NEXUS_REQUIRE_SHARED(model_path, "arch/" + c.file + ".gguf");
  NEXUS_REQUIRE_SHARED(ref_path, "arch/" + c.file + ".ref.json");
  const ArchRef ref = load_arch_ref(ref_path);
  GgufFile gguf(model_path);
  LlamaModel model(gguf);
  EXPECT_EQ(model.config().arch, c.arch);

  expect_matches_reference(model, ref, c.file, c.rms_tol, c.exact_greedy);
}

INSTANTIATE_TEST_SUITE_P(Files, ArchFamily, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param.file;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

// `nexus info`'s model line names the family and what of it the file uses.
TEST(ArchFamilyDescribe, NamesWhatTheFileUses) {
  const std::pair<const char*, const char*> cases[] = {
      {"arch/gemma2-d64-F32.gguf", "GEGLU FFN, post-attention/FFN norms, embeddings x sqrt(n_embd), attention soft-cap "
                                   "50, final soft-cap 30, sliding window 8 on 13 of 26 layers, tied output"},
      {"arch/phi3-d256-F32.gguf", "NEOX RoPE, RMSNorm, SwiGLU FFN, fused attn_qkv, fused gate+up"},
      {"arch/starcoder2-d256-F32.gguf", "LayerNorm, GELU MLP, Q/K/V biases, output/FFN biases"},
      {"arch/llama3rope-d256-F32.gguf", "llama: 2 layers, dim 256, 4 heads of 64 (2 KV), FFN 768, context 256, NORM "
                                        "RoPE, rope_freqs factors"},
  };
  for (const auto& [file, want] : cases) {
    NEXUS_REQUIRE_SHARED(path, file);
    GgufFile gguf(path);
    const std::string got = LlamaModel(gguf).describe();
    EXPECT_NE(got.find(want), std::string::npos) << got;
  }
}

// A copy of `src` with its metadata and tensors passed through `edit`:
// key_edit may drop a key (return false); tensor_edit may drop a tensor
// (return false) or change its shape (ne), its data then being the source's
// bytes truncated or zero-padded; `add` may set more keys; extra_f32 names
// F32 tensors ([ne0]) to add, of the given values (none: zeros).
struct Rewrite {
  std::function<bool(const std::string&)> keep_key = [](const std::string&) { return true; };
  std::function<bool(const std::string&, std::vector<uint64_t>&)> tensor_edit = [](const std::string&, auto&) {
    return true;
  };
  std::function<void(GgufWriter&)> add = [](GgufWriter&) {};
  struct Extra {
    std::string name;
    uint64_t ne0;
    std::vector<float> values = {};
  };
  std::vector<Extra> extra_f32;
};

std::string rewritten_copy(const std::string& src, const std::string& name, const Rewrite& rw) {
  GgufFile in(src);
  GgufWriter w;
  for (const auto& [key, value] : in.metadata())
    if (key != "general.alignment" && rw.keep_key(key)) w.set(key, value);
  rw.add(w);
  std::vector<const TensorInfo*> kept;
  for (const TensorInfo& t : in.tensors()) {
    std::vector<uint64_t> ne = t.ne;
    if (!rw.tensor_edit(t.name, ne)) continue;
    w.add_tensor(t.name, t.type, ne);
    kept.push_back(&t);
  }
  for (const Rewrite::Extra& e : rw.extra_f32) w.add_tensor(e.name, GgmlType::F32, {e.ne0});
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf")).string();
  w.write(path, [&](size_t i, std::span<uint8_t> dst) {
    std::fill(dst.begin(), dst.end(), uint8_t{0});
    if (i < kept.size()) std::memcpy(dst.data(), kept[i]->data, std::min<size_t>(dst.size(), kept[i]->n_bytes));
    else if (const auto& v = rw.extra_f32[i - kept.size()].values; !v.empty())
      std::memcpy(dst.data(), v.data(), std::min(dst.size(), v.size() * sizeof(float)));
  });
  return path;
}

std::string load_error(const std::string& path) {
  try {
    GgufFile gguf(path);
    LlamaModel model(gguf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const std::string& path, const std::string& message) {
  const std::string e = load_error(path);
  EXPECT_NE(e.find(message), std::string::npos) << "got: '" << e << "'";
  std::filesystem::remove(path);
}

TEST(ArchFamilyBadInput, MissingTensorIsNamed) {
  NEXUS_REQUIRE_SHARED(src, "arch/qwen2-d256-F32.gguf");
  Rewrite rw;
  rw.tensor_edit = [](const std::string& n, auto&) { return n != "blk.1.attn_k.bias"; };
  expect_refused(rewritten_copy(src, "nexus-qwen2-missing", rw), "missing tensor blk.1.attn_k.bias");
}

TEST(ArchFamilyBadInput, MissingFusedTensorIsNamed) {
  NEXUS_REQUIRE_SHARED(src, "arch/phi3-d256-F32.gguf");
  Rewrite rw;
  rw.tensor_edit = [](const std::string& n, auto&) { return n != "blk.1.attn_qkv.weight"; };
  expect_refused(rewritten_copy(src, "nexus-phi3-missing", rw), "missing tensor blk.1.attn_qkv.weight");
}

TEST(ArchFamilyBadInput, WrongShapeIsNamed) {
  NEXUS_REQUIRE_SHARED(src, "arch/phi3-d256-F32.gguf");
  Rewrite rw;
  rw.tensor_edit = [](const std::string& n, auto& ne) {
    if (n == "blk.0.attn_qkv.weight") ne[1] -= 64;  // one KV head's rows short
    return true;
  };
  expect_refused(rewritten_copy(src, "nexus-phi3-shape", rw),
                 "tensor blk.0.attn_qkv.weight has shape 448x256, expected 512x256");
}

TEST(ArchFamilyBadInput, UnknownRopeScalingIsNamed) {
  NEXUS_REQUIRE_SHARED(src, "arch/starcoder2-d256-F32.gguf");
  Rewrite rw;
  rw.add = [](GgufWriter& w) {
    w.set_string("starcoder2.rope.scaling.type", "su-per");
    w.set_f32("starcoder2.rope.scaling.factor", 4.0f);
  };
  expect_refused(rewritten_copy(src, "nexus-sc2-scaling", rw), "RoPE scaling type 'su-per' is not implemented");
}

TEST(ArchFamilyBadInput, UnusedTensorIsNamed) {
  NEXUS_REQUIRE_SHARED(src, "arch/qwen2-d256-F32.gguf");
  Rewrite rw;
  rw.extra_f32 = {{"blk.0.attn_q_norm.weight", 64}};  // qwen3 has it, qwen2 does not
  expect_refused(rewritten_copy(src, "nexus-qwen2-extra", rw),
                 "tensor blk.0.attn_q_norm.weight is not used by architecture qwen2");
}

TEST(ArchFamilyBadInput, UnknownArchitectureIsNamed) {
  NEXUS_REQUIRE_SHARED(src, "arch/qwen2-d256-F32.gguf");
  Rewrite rw;
  rw.keep_key = [](const std::string& k) { return k != "general.architecture"; };
  rw.add = [](GgufWriter& w) { w.set_string("general.architecture", "qwen9"); };
  expect_refused(rewritten_copy(src, "nexus-qwen9", rw), "unsupported architecture 'qwen9'");
}

// ---------------------------------------------------------------------------
// phi3 LongRoPE (Phi-3 / 3.5 / 4-mini 128k files): rope_factors_long.weight
// and rope_factors_short.weight divide RoPE's frequencies, the long ones when
// the context exceeds rope.scaling.original_context_length (llama.cpp
// llama_model::get_rope_factors, by the context the caller runs, not by
// position), and rope.scaling.attn_factor (convert_hf_to_gguf.py writes
// sqrt(1 + ln(scale) / ln(original context))) multiplies cos and sin
// whichever set is used (llama-context.cpp: cparams.yarn_attn_factor).

// n_rot / 2 = 32 factors of phi3-d256: 1 + (j mod 7) * `step`, reversed if asked.
std::vector<float> factors(float step, bool reversed) {
  std::vector<float> f(32);
  for (int j = 0; j < 32; ++j) f[static_cast<size_t>(j)] = 1.0f + static_cast<float>(j % 7) * step;
  if (reversed) std::reverse(f.begin(), f.end());
  return f;
}

std::string longrope_copy(const std::string& src, const std::string& name, std::vector<float> short_f,
                          std::vector<float> long_f, float attn_factor) {
  Rewrite rw;
  rw.add = [attn_factor](GgufWriter& w) {
    w.set_u32("phi3.rope.scaling.original_context_length", 128);
    if (attn_factor != 1.0f) w.set_f32("phi3.rope.scaling.attn_factor", attn_factor);
  };
  rw.extra_f32 = {{"rope_factors_long.weight", 32, std::move(long_f)},
                  {"rope_factors_short.weight", 32, std::move(short_f)}};
  return rewritten_copy(src, name, rw);
}

// Teacher-forced logits of the reference prompt + greedy ids, in a context of n_ctx.
std::vector<float> logits_in_context(const std::string& path, const ArchRef& ref, int32_t n_ctx) {
  GgufFile gguf(path);
  LlamaModel model(gguf);
  LlamaContext ctx(model, n_ctx, 1);
  std::vector<int32_t> seq = ref.prompt_ids;
  seq.insert(seq.end(), ref.greedy_ids.begin(), ref.greedy_ids.end() - 1);
  const std::span<const float> all = ctx.eval_all(seq);
  return {all.begin(), all.end()};
}

TEST(ArchFamilyLongRope, FactorsOfOneLeaveLlamaCppsLogits) {
  NEXUS_REQUIRE_SHARED(src, "arch/phi3-d256-F32.gguf");
  NEXUS_REQUIRE_SHARED(ref_path, "arch/phi3-d256-F32.ref.json");
  const ArchRef ref = load_arch_ref(ref_path);
  const std::string ones = longrope_copy(src, "nexus-phi3-longrope-ones", factors(0, false), factors(0, false), 1.0f);
  // Both sets loaded (nexus info names them), and with every divisor 1 the
  // logits are the original file's, which match llama.cpp's (ArchFamily).
  {
    GgufFile gguf(ones);
    EXPECT_NE(LlamaModel(gguf).describe().find("LongRoPE factors (long above context 128)"), std::string::npos);
  }
  EXPECT_EQ(logits_in_context(ones, ref, 256), logits_in_context(src, ref, 256));
  EXPECT_EQ(logits_in_context(ones, ref, 128), logits_in_context(src, ref, 128));
  std::filesystem::remove(ones);
}

TEST(ArchFamilyLongRope, ContextChoosesLongOrShort) {
  NEXUS_REQUIRE_SHARED(src, "arch/phi3-d256-F32.gguf");
  NEXUS_REQUIRE_SHARED(ref_path, "arch/phi3-d256-F32.ref.json");
  const ArchRef ref = load_arch_ref(ref_path);
  const std::vector<float> s = factors(0.5f, false), l = factors(3.0f, true);
  const std::string a = longrope_copy(src, "nexus-phi3-longrope-a", s, l, 1.0f);
  const std::string b = longrope_copy(src, "nexus-phi3-longrope-b", l, s, 1.0f);  // the sets swapped
  // Context 128 = original_context_length: short; 129 and 256: long.
  const std::vector<float> a_short = logits_in_context(a, ref, 128), a_long = logits_in_context(a, ref, 256);
  EXPECT_EQ(a_short, logits_in_context(b, ref, 256));
  EXPECT_EQ(a_long, logits_in_context(b, ref, 128));
  EXPECT_EQ(a_long, logits_in_context(a, ref, 129));
  EXPECT_NE(a_short, a_long);
  EXPECT_NE(a_short, logits_in_context(src, ref, 128));  // and the factors matter
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

// The RoPE table a phi3 LongRoPE file gets against the definition in
// float64: cos / sin of pos * base^(-2j / n_rot) / factor[j], times attn_factor.
TEST(ArchFamilyLongRope, AnglesMatchTheFloat64Definition) {
  NEXUS_REQUIRE_SHARED(src, "arch/phi3-d256-F32.gguf");
  const std::vector<float> s = factors(0.5f, false), l = factors(3.0f, true);
  const float attn = 1.1902381f;  // Phi-4-mini's rope.scaling.attn_factor
  const std::string path = longrope_copy(src, "nexus-phi3-longrope-angles", s, l, attn);
  GgufFile gguf(path);
  LlamaModel model(gguf);
  const LlamaConfig& c = model.config();
  EXPECT_NE(model.describe().find("RoPE attention factor 1.19"), std::string::npos) << model.describe();
  const std::vector<int32_t> pos = {0, 1, 5, 31, 127, 200, 255};
  for (const auto& [n_ctx, f] : {std::pair{128, &s}, std::pair{256, &l}}) {
    std::vector<float> cs(pos.size() * static_cast<size_t>(c.n_rot));
    rope_tables(c, model.rope_factors_for(n_ctx), pos.data(), static_cast<int64_t>(pos.size()), false, cs.data());
    double worst = 0;
    for (size_t t = 0; t < pos.size(); ++t)
      for (int j = 0; j < c.n_rot / 2; ++j) {
        const double theta = pos[t] * std::pow(10000.0, -2.0 * j / c.n_rot) / (*f)[static_cast<size_t>(j)];
        worst = std::max({worst, std::abs(cs[t * c.n_rot + 2 * j] - std::cos(theta) * attn),
                          std::abs(cs[t * c.n_rot + 2 * j + 1] - std::sin(theta) * attn)});
      }
    EXPECT_LE(worst, 3e-7) << "context " << n_ctx;  // float32 rounding of values up to 1.19
  }
  std::filesystem::remove(path);
}

TEST(ArchFamilyLongRope, BadFactorTensorsAreNamed) {
  NEXUS_REQUIRE_SHARED(src, "arch/phi3-d256-F32.gguf");
  Rewrite rw;
  rw.extra_f32 = {{"rope_factors_long.weight", 16}};  // n_rot / 2 = 32 expected
  expect_refused(rewritten_copy(src, "nexus-phi3-longrope-shape", rw),
                 "tensor rope_factors_long.weight has shape 1x16, expected 1x32");
  Rewrite none;
  none.add = [](GgufWriter& w) { w.set_string("phi3.rope.scaling.type", "longrope"); };
  expect_refused(rewritten_copy(src, "nexus-phi3-longrope-none", none),
                 "rope.scaling.type longrope without rope_factors_long/short.weight tensors");
  Rewrite other;  // LongRoPE factors on a family that has none
  other.extra_f32 = {{"rope_factors_long.weight", 32, factors(0, false)}};
  NEXUS_REQUIRE_SHARED(qwen, "arch/qwen2-d256-F32.gguf");
  expect_refused(rewritten_copy(qwen, "nexus-qwen2-longrope", other),
                 "tensor rope_factors_long.weight is not used by architecture qwen2");
}

// ---------------------------------------------------------------------------
// The same bad files at the command line: `nexus info` (which still lists the
// file) and `nexus run` exit 1 with the message on stderr; no crash, no
// out-of-bounds read (the ASan build runs these too).

TEST(ArchFamilyBadInput, CliInfoAndRunExitNonZeroNamingTheProblem) {
  NEXUS_REQUIRE_SHARED(phi3, "arch/phi3-d256-F32.gguf");
  NEXUS_REQUIRE_SHARED(qwen2, "arch/qwen2-d256-F32.gguf");
  Rewrite missing, shape, scaling, cap;
  missing.tensor_edit = [](const std::string& n, auto&) { return n != "blk.1.attn_k.bias"; };
  shape.tensor_edit = [](const std::string& n, auto& ne) {
    if (n == "blk.0.attn_qkv.weight") ne[1] -= 64;
    return true;
  };
  scaling.add = [](GgufWriter& w) { w.set_string("qwen2.rope.scaling.type", "su-per"); };
  cap.add = [](GgufWriter& w) { w.set_f32("qwen2.final_logit_softcapping", 30.0f); };
  const struct {
    std::string path, message;
  } cases[] = {
      {rewritten_copy(qwen2, "nexus-cli-missing", missing), "missing tensor blk.1.attn_k.bias"},
      {rewritten_copy(phi3, "nexus-cli-shape", shape), "tensor blk.0.attn_qkv.weight has shape 448x256, expected 512x256"},
      {rewritten_copy(qwen2, "nexus-cli-scaling", scaling), "RoPE scaling type 'su-per' is not implemented"},
      {rewritten_copy(qwen2, "nexus-cli-cap", cap), "qwen2.final_logit_softcapping is not implemented"},
  };
  for (const auto& c : cases) {
    const CommandResult info = run_nexus("info --no-tensors " + shell_quote(c.path));
    EXPECT_EQ(info.exit_code, 1) << c.message;
    EXPECT_NE(info.err.find("nexus: error: not runnable: "), std::string::npos) << info.err;
    EXPECT_NE(info.err.find(c.message), std::string::npos) << info.err;
    EXPECT_NE(info.out.find("model: not runnable: "), std::string::npos) << info.out;  // after the listing
    const CommandResult run = run_nexus("run -m " + shell_quote(c.path) + " --temp 0 -n 4 -t 1 -p 'Once upon'");
    EXPECT_EQ(run.exit_code, 1) << c.message;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    std::filesystem::remove(c.path);
  }
}

}  // namespace
