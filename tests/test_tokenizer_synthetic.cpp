// Tokenizers over small synthetic vocabularies written with test::GgufWriter:
// SPM merge order and byte fallback, BPE merge ranks and ignore_merges, and
// the validation of tokenizer metadata (every error names the file).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "support/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nexus {
namespace {

// A vocabulary-only GGUF image (test::GgufWriter) and the tokenizer read
// from it; the GgufFile keeps pointing into this object.
class GgufBuilder {
 public:
  GgufBuilder& str(const std::string& k, const std::string& v) { return kv(k, w_.str(v)); }
  GgufBuilder& u32(const std::string& k, uint32_t v) { return kv(k, w_.u32(v)); }
  GgufBuilder& boolean(const std::string& k, bool v) { return kv(k, w_.boolean(v)); }
  GgufBuilder& strs(const std::string& k, const std::vector<std::string>& v) {
    return array(k, GgufValueType::STRING, v, [&](const std::string& x) { return w_.str(x); });
  }
  GgufBuilder& f32s(const std::string& k, const std::vector<float>& v) {
    return array(k, GgufValueType::FLOAT32, v, [&](float x) { return w_.f32(x); });
  }
  GgufBuilder& i32s(const std::string& k, const std::vector<int32_t>& v) {
    return array(k, GgufValueType::INT32, v, [&](int32_t x) { return w_.i32(x); });
  }
  std::unique_ptr<Tokenizer> tokenizer() {
    image_ = w_.build();
    file_ = std::make_unique<GgufFile>(std::span<const uint8_t>(image_), "synthetic.gguf");
    return Tokenizer::from_gguf(*file_);
  }

 private:
  GgufBuilder& kv(const std::string& k, const test::GgufWriter::Value& v) {
    w_.kv(k, v);
    return *this;
  }
  template <class T, class F>
  GgufBuilder& array(const std::string& k, GgufValueType t, const std::vector<T>& v, F enc) {
    std::vector<test::GgufWriter::Value> items;
    for (const T& x : v) items.push_back(enc(x));
    return kv(k, w_.array(t, items));
  }
  test::GgufWriter w_;
  std::vector<uint8_t> image_;
  std::unique_ptr<GgufFile> file_;
};

const std::string kSp = "\xE2\x96\x81";  // ▁
using Strs = std::vector<std::string>;

// <unk> <s> </s>, 256 byte tokens, then `extra` (text, score) pairs.
// `mutate` may damage the arrays before they are written.
using Mutate = std::function<void(Strs&, std::vector<float>&, std::vector<int32_t>&)>;
GgufBuilder spm_vocab(const std::vector<std::pair<std::string, float>>& extra,
                      bool with_bytes = true, const Mutate& mutate = {}) {
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      toks.push_back(buf);
      scores.push_back(0);
      types.push_back(6);
    }
  }
  for (const auto& [t, s] : extra) {
    toks.push_back(t);
    scores.push_back(s);
    types.push_back(1);
  }
  if (mutate) mutate(toks, scores, types);
  GgufBuilder g;
  g.str("tokenizer.ggml.model", "llama").strs("tokenizer.ggml.tokens", toks);
  g.f32s("tokenizer.ggml.scores", scores).i32s("tokenizer.ggml.token_type", types);
  return g;
}

std::vector<std::string> texts(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(t.token_text(id));
  return out;
}

TEST(SpmSynthetic, MergesHighestScoreFirstAndLeftmostOnTies) {
  auto g = spm_vocab({{kSp, -1}, {"a", -1}, {"b", -1}, {kSp + "a", -3}, {"ab", -2},
                      {kSp + "ab", -4}, {"aa", -5}});
  const auto tok = g.tokenizer();
  // "▁ab": "ab" (-2) beats "▁a" (-3); then "▁" + "ab" exists.
  EXPECT_EQ(texts(*tok, tok->encode("ab", false)), (Strs{kSp + "ab"}));
  // "▁a" (-3) beats "aa" (-5), then "aa" is merged.
  EXPECT_EQ(texts(*tok, tok->encode("aaa", false)), (Strs{kSp + "a", "aa"}));
  // Not in the vocabulary: UTF-8 bytes of "é" as <0xC3> <0xA9>.
  EXPECT_EQ(texts(*tok, tok->encode("é", false)), (Strs{kSp, "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(tok->decode(tok->encode("é ab", true)), "é ab");
}

TEST(SpmSynthetic, EqualScoresMergeLeftmostFirst) {
  auto g = spm_vocab({{"a", -1}, {"aa", -5}});
  g.boolean("tokenizer.ggml.add_space_prefix", false);
  const auto tok = g.tokenizer();
  EXPECT_EQ(texts(*tok, tok->encode("aaa", false)), (Strs{"aa", "a"}));
  EXPECT_EQ(texts(*tok, tok->encode("aaaaa", false)), (Strs{"aa", "aa", "a"}));
}

TEST(SpmSynthetic, UnknownWithoutByteTokensAndNoSpacePrefix) {
  auto g = spm_vocab({{kSp, -1}, {"a", -1}}, /*with_bytes=*/false);
  g.boolean("tokenizer.ggml.add_space_prefix", false);
  const auto tok = g.tokenizer();
  EXPECT_FALSE(tok->add_space_prefix());
  EXPECT_EQ(texts(*tok, tok->encode("a\xC3\xA9", false)), (Strs{"a", "<unk>", "<unk>"}));
  EXPECT_EQ(tok->encode("a", true), (std::vector<int32_t>{1, 4}));
}

TEST(SpmSynthetic, SpecialIdsFromMetadata) {
  auto g = spm_vocab({{kSp, -1}});
  g.u32("tokenizer.ggml.bos_token_id", 2).u32("tokenizer.ggml.eos_token_id", 1);
  g.u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none", as stories260K stores it
  g.boolean("tokenizer.ggml.add_bos_token", false);
  const auto tok = g.tokenizer();
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_EQ(tok->encode("", true), std::vector<int32_t>{});
  EXPECT_EQ(tok->eog_ids(), std::vector<int32_t>{1});
}

void expect_error(GgufBuilder& g, const std::string& needle) {
  try {
    g.tokenizer();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("synthetic.gguf: ", 0), 0u) << "names the file: " << e.what();
  }
}

void expect_error(GgufBuilder&& g, const std::string& needle) { expect_error(g, needle); }

TEST(TokenizerMetadata, RejectsInconsistentVocabularies) {
  expect_error(spm_vocab({}).u32("tokenizer.ggml.bos_token_id", 5000), "bos_token_id");
  expect_error(spm_vocab({}).u32("tokenizer.ggml.eot_token_id", 259), "eot_token_id");
  expect_error(spm_vocab({}, true, [](Strs&, auto& sc, auto&) { sc.resize(2); }), "scores");
  expect_error(spm_vocab({}, true, [](Strs&, auto&, auto& ty) { ty.pop_back(); }), "token_type");
  expect_error(spm_vocab({}, true, [](Strs&, auto&, auto& ty) { ty[7] = 9; }), "token_type 9");
  expect_error(spm_vocab({}).u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu), "BOS");
  GgufBuilder g1, g2, g3, g4;
  expect_error(g1.str("tokenizer.ggml.model", "llama"), "tokenizer.ggml.tokens");
  expect_error(g2.str("tokenizer.ggml.model", "llama").i32s("tokenizer.ggml.tokens", {1}),
               "tokenizer.ggml.tokens");
  expect_error(g3.strs("tokenizer.ggml.tokens", {"a"}), "tokenizer.ggml.model");
  expect_error(g4.str("tokenizer.ggml.model", "t5").strs("tokenizer.ggml.tokens", {"a"}), "'t5'");
  // A wrongly typed scalar is reported by the GGUF reader.
  expect_error(spm_vocab({}).str("tokenizer.ggml.bos_token_id", "1"), "bos_token_id");
}

// Byte-level vocabulary: the 256 byte characters, then merged tokens.
GgufBuilder bpe_vocab(const std::string& pre, const Strs& merges, const Strs& extra) {
  Strs toks;
  // GPT-2 bytes_to_unicode, written out independently of the implementation.
  int extra_cp = 0;
  for (int i = 0; i < 256; ++i) {
    const bool printable = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
    std::string s;
    utf8::append(s, printable ? i : 256 + extra_cp++);
    toks.push_back(s);
  }
  toks.insert(toks.end(), extra.begin(), extra.end());
  GgufBuilder g;
  g.str("tokenizer.ggml.model", "gpt2").strs("tokenizer.ggml.tokens", toks);
  g.strs("tokenizer.ggml.merges", merges);
  if (!pre.empty()) g.str("tokenizer.ggml.pre", pre);
  return g;
}

TEST(BpeSynthetic, MergesByRankWithinWords) {
  const std::string G = "\xC4\xA0";  // Ġ, the byte-level space
  auto g = bpe_vocab("gpt-2", {"l o", "lo w", G + " lo", "e r", "low er"},
                     {"lo", "low", G + "lo", "er", "lower"});
  const auto tok = g.tokenizer();
  // "lower": l o -> lo, lo w -> low, e r -> er, low er -> lower.
  EXPECT_EQ(texts(*tok, tok->encode("lower", true)), (Strs{"lower"}));
  // " low": "Ġ lo" (rank 2) comes after "lo w" (rank 1): Ġ + low, no "Ġlow" token.
  EXPECT_EQ(texts(*tok, tok->encode(" low", false)), (Strs{G, "low"}));
  // Words never merge across pre-tokenizer boundaries ("lo" + "!" + "w").
  EXPECT_EQ(texts(*tok, tok->encode("lo!w", false)), (Strs{"lo", "!", "w"}));
  EXPECT_EQ(tok->decode(tok->encode("  lower \xF0\x9F\xA6\x99\n", false)), "  lower \xF0\x9F\xA6\x99\n");
  EXPECT_EQ(tok->bos_id(), -1);
}

TEST(BpeSynthetic, Llama3IgnoresMergesForWholeWordTokens) {
  // "abc" is a token but no merge chain reaches it.
  auto g = bpe_vocab("llama-bpe", {"a b"}, {"ab", "abc", "<|begin_of_text|>"});
  g.u32("tokenizer.ggml.bos_token_id", 258);
  const auto tok = g.tokenizer();
  EXPECT_TRUE(tok->add_bos_default());  // llama3 family default
  EXPECT_EQ(texts(*tok, tok->encode("abc", true)), (Strs{"<|begin_of_text|>", "abc"}));
  auto g2 = bpe_vocab("gpt-2", {"a b"}, {"ab", "abc"});
  const auto tok2 = g2.tokenizer();
  EXPECT_EQ(texts(*tok2, tok2->encode("abc", true)), (Strs{"ab", "c"}));
}

TEST(BpeSynthetic, RejectsBadMetadata) {
  auto g1 = bpe_vocab("no-such-pre", {}, {});
  expect_error(g1, "no-such-pre");
  auto g2 = bpe_vocab("gpt-2", {"abc"}, {});
  expect_error(g2, "merge 0");
  GgufBuilder g3;
  expect_error(g3.str("tokenizer.ggml.model", "gpt2").strs("tokenizer.ggml.tokens", {"a"}), "merges");
}

}  // namespace
}  // namespace nexus
