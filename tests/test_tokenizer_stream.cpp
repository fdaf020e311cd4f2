// StreamDecoder, the UTF-8 helpers, the pre-tokenizer regexes, and random
// bytes through the real vocabularies of ../shared/models/tokenizers.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nexus {
namespace {

using Strs = std::vector<std::string>;

// ---- StreamDecoder --------------------------------------------------------

const Tokenizer& real(const std::string& name) {
  static std::map<std::string, std::pair<std::unique_ptr<GgufFile>, std::unique_ptr<Tokenizer>>> cache;
  auto& e = cache[name];
  if (!e.second) {
    e.first = std::make_unique<GgufFile>(test::shared_model_path("tokenizers/ggml-vocab-" + name + ".gguf"));
    e.second = Tokenizer::from_gguf(*e.first);
  }
  return *e.second;
}

TEST(StreamDecoder, EmojiSplitAcrossByteTokensComesOutWhole) {
  NEXUS_REQUIRE_SHARED(p, "tokenizers/ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = real("llama-spm");
  const std::string text = "Hi \xF0\x9F\xA6\x99 and \xE4\xBD\xA0!";  // 🦙, 你
  const auto ids = tok.encode(text, false);
  StreamDecoder dec(tok);
  std::string all;
  std::vector<std::string> chunks;
  for (int32_t id : ids) {
    const std::string c = dec.push(id);
    EXPECT_TRUE(utf8::is_valid(c)) << "chunk ends inside a character";
    chunks.push_back(c);
    all += c;
  }
  all += dec.flush();
  EXPECT_EQ(all, " " + text);  // the stream keeps the SPM leading space
  // The emoji is 4 byte tokens: 3 empty chunks, then the whole character.
  const int32_t f0 = tok.find_token("<0xF0>");
  const auto it = std::find(ids.begin(), ids.end(), f0);
  ASSERT_NE(it, ids.end());
  const size_t i = it - ids.begin();
  EXPECT_EQ(chunks[i], "");
  EXPECT_EQ(chunks[i + 1], "");
  EXPECT_EQ(chunks[i + 2], "");
  EXPECT_EQ(chunks[i + 3], "\xF0\x9F\xA6\x99");
}

TEST(StreamDecoder, ByteLevelPiecesStayWhole) {
  NEXUS_REQUIRE_SHARED(p, "tokenizers/ggml-vocab-gpt-2.gguf");
  const Tokenizer& tok = real("gpt-2");
  const std::string text = "\xF0\x9F\x9A\x80 (normal) \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F \xE1\x9E\x80";
  StreamDecoder dec(tok);
  std::string all;
  for (int32_t id : tok.encode(text, false)) {
    const std::string c = dec.push(id);
    EXPECT_TRUE(utf8::is_valid(c));
    all += c;
  }
  EXPECT_EQ(dec.flush(), "");
  EXPECT_EQ(all, text);
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  NEXUS_REQUIRE_SHARED(p, "tokenizers/ggml-vocab-llama-spm.gguf");
  const Tokenizer& tok = real("llama-spm");
  const int32_t ff = tok.find_token("<0xFF>"), e2 = tok.find_token("<0xE2>"),
                x82 = tok.find_token("<0x82>"), a = tok.find_token("a");
  const std::string fffd = "\xEF\xBF\xBD";
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(ff), fffd);  // can never start a character: replaced at once
  EXPECT_EQ(dec.push(e2), "");
  EXPECT_EQ(dec.push(x82), "");   // still a possible prefix of U+20xx
  EXPECT_EQ(dec.push(a), fffd + fffd + "a");
  EXPECT_EQ(dec.push(e2), "");
  EXPECT_EQ(dec.flush(), fffd);   // unfinished at the end
  EXPECT_EQ(dec.flush(), "");
  EXPECT_EQ(dec.push(tok.bos_id()), "");  // control tokens render nothing
}

// ---- UTF-8 helpers --------------------------------------------------------

TEST(Utf8, DecodeValidatesPerUnicodeTable3_7) {
  EXPECT_EQ(utf8::decode("\xE2\x82\xAC", 0).cp, 0x20ACu);
  EXPECT_EQ(utf8::decode("\xF0\x9F\xA6\x99", 0).len, 4u);
  for (const char* bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80",
                          "\xF8\x88\x80\x80\x80", "\xE2\x82"}) {
    const auto d = utf8::decode(bad, 0);
    EXPECT_FALSE(d.valid) << bad;
    EXPECT_EQ(d.len, 1u);
  }
  EXPECT_TRUE(utf8::is_valid("h\xC3\xA9llo \xF0\x9F\xA6\x99"));
  EXPECT_FALSE(utf8::is_valid("\xED\xBF\xBF"));
  EXPECT_EQ(utf8::incomplete_tail("ab\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xF0\x9F\xA6\x99"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xE0\x80"), 0u);  // overlong: can never complete
  EXPECT_EQ(utf8::incomplete_tail("\xC3"), 1u);
  EXPECT_EQ(utf8::sanitize("a\xFF" "b\xE2\x82"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

// ---- Pre-tokenizer --------------------------------------------------------

Strs split(const std::string& pre, const std::string& text) {
  tok::PreTokenizer p(pre);
  Strs out;
  for (auto v : p.split(text)) out.emplace_back(v);
  return out;
}

TEST(PreTokenizer, FamiliesSplitAsTheirRegexesSay) {
  EXPECT_EQ(split("gpt-2", "Hello world's  x\n"), (Strs{"Hello", " world", "'s", " ", " x", "\n"}));
  EXPECT_EQ(split("llama3", "12345 abc's\n\nx"), (Strs{"123", "45", " abc", "'s", "\n\n", "x"}));
  EXPECT_EQ(split("qwen2", "12345"), (Strs{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("starcoder", "x=12;"), (Strs{"x", "=", "1", "2", ";"}));
  // deepseek-coder: newlines alone, letters, punctuation, CJK runs, single digits.
  EXPECT_EQ(split("deepseek-coder", "a\n\xE4\xBD\xA0\xE5\xA5\xBD 42!"),
            (Strs{"a", "\n", "\xE4\xBD\xA0\xE5\xA5\xBD", " ", "4", "2", "!"}));
  EXPECT_EQ(split("default", "I'm 1234"), (Strs{"I", "'", "m", " ", "123", "4"}));
  EXPECT_THROW(split("whatever", "x"), Error);
  EXPECT_TRUE(split("gpt-2", "").empty());
}

TEST(PreTokenizer, PiecesCoverArbitraryBytes) {
  std::mt19937 rng(1234);
  for (const char* pre : {"gpt-2", "llama3", "qwen2", "deepseek-coder", "starcoder", "default", "falcon"}) {
    tok::PreTokenizer p(pre);
    for (int n = 0; n < 50; ++n) {
      std::string s(rng() % 40, '\0');
      for (char& c : s) c = static_cast<char>(rng() % 4 ? "a 1\n\xC3\xA9!\xF0\x9F"[rng() % 9] : rng());
      std::string joined;
      for (auto v : p.split(s)) {
        EXPECT_FALSE(v.empty());
        joined += v;
      }
      EXPECT_EQ(joined, s) << pre;
    }
  }
}

// ---- Random bytes through the real vocabularies ---------------------------

TEST(TokenizerFuzz, RandomBytesEncodeAndRoundTrip) {
  NEXUS_REQUIRE_SHARED(p, "tokenizers/ggml-vocab-gpt-2.gguf");
  std::mt19937 rng(42);
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "starcoder"}) {
    const Tokenizer& tok = real(name);
    for (int n = 0; n < 60; ++n) {
      std::string s(rng() % 48, '\0');
      for (char& c : s) c = static_cast<char>(rng());
      std::vector<int32_t> ids;
      ASSERT_NO_THROW(ids = tok.encode(s, true, n % 2 == 0)) << name;
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
      // SPM (byte fallback) and GPT-2 (all 256 byte tokens) lose nothing.
      if (std::string(name) == "llama-spm" || std::string(name) == "gpt-2") {
        EXPECT_EQ(tok.decode(tok.encode(s, false)), s) << name;
      }
      StreamDecoder dec(tok);
      std::string streamed;
      for (int32_t id : ids) streamed += dec.push(id);
      streamed += dec.flush();
      EXPECT_TRUE(utf8::is_valid(streamed));
    }
  }
}

}  // namespace
}  // namespace nexus
