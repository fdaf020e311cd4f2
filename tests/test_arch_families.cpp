// Model families against llama.cpp: ../shared/models/arch/FAMILY-*.gguf are
// random-weight models in each family's exact tensor layout, and their
// .ref.json llama.cpp's greedy ids and logits (arch/README.md). The method
// and the quantized tolerances are test_arch_reference.cpp's (its header
// says why): teacher-forced logits of all 32 steps in one batch, compared by
// RMS and largest difference; free-running greedy ids, which for the F32
// files must equal llama.cpp's for all 32 steps.
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

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/llama_context.h"
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
// F32 tensors ([ne0]) of zeros to add.
struct Rewrite {
  std::function<bool(const std::string&)> keep_key = [](const std::string&) { return true; };
  std::function<bool(const std::string&, std::vector<uint64_t>&)> tensor_edit = [](const std::string&, auto&) {
    return true;
  };
  std::function<void(GgufWriter&)> add = [](GgufWriter&) {};
  std::vector<std::pair<std::string, uint64_t>> extra_f32;
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
  for (const auto& [n, ne0] : rw.extra_f32) w.add_tensor(n, GgmlType::F32, {ne0});
  const std::string path = (std::filesystem::temp_directory_path() / (name + ".gguf")).string();
  w.write(path, [&](size_t i, std::span<uint8_t> dst) {
    std::fill(dst.begin(), dst.end(), uint8_t{0});
    if (i < kept.size()) std::memcpy(dst.data(), kept[i]->data, std::min<size_t>(dst.size(), kept[i]->n_bytes));
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

}  // namespace

