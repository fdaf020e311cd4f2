// PreTokenizer families: every tokenizer.ggml.pre value llama.cpp's
// llama-vocab.cpp accepts (listed here independently of src/), the splits
// that tell the families apart, and refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "util/error.h"

namespace nexus::tok {
namespace {

// llama.cpp's llama_vocab::impl::load, every name of its pre-tokenizer chain.
const char* const kLlamaCppNames[] = {
    "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
    "midm-2.0", "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3",
    "spark2_5", "youtu", "falcon", "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de",
    "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jais-2",
    "gemma4", "granite-embed-multi-311m", "sarvam-moe", "jina-v1-en", "jina-v2-code",
    "roberta-bpe", "refact", "command-r", "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2",
    "qwen35", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "glm4", "chatglm-bpe",
    "viking", "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone",
    "exaone4", "exaone-moe", "chameleon", "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2",
    "talkie", "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe", "trillion",
    "granite-docling", "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan",
    "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna",
    "minimax-m2", "solar-open", "mellum2", "whitespace"};

using Pieces = std::vector<std::string>;

Pieces split(std::string_view pre, std::string_view text) {
  const PreTokenizer p(pre);
  Pieces out;
  for (std::string_view s : p.split(text)) out.emplace_back(s);
  return out;
}

TEST(PreTokenizerFamilies, EveryLlamaCppNameSplitsAnyTextExactly) {
  // Latin, contractions, digits, CJK, kana, Hangul, Cyrillic, Arabic,
  // Devanagari, emoji, code, whitespace runs, CRLF and two invalid bytes.
  const std::string text =
      "Hello WORLD, it's 1234567 x\xC2\xB2! \xE4\xBD\xA0\xE5\xA5\xBD\xE3\x81\x8B\xE3\x82\xAB "
      "\xEC\x95\x88\xEB\x85\x95 \xD0\x9F\xD1\x80\xD0\xB8 \xD9\x85\xD8\xB1 "
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xF0\x9F\x98\x80\n"
      "  def f(x):\r\n\treturn x**2  # <sentinel:1>\n\n\n   \xFF\xFE end  ";
  for (const char* name : kLlamaCppNames) {
    if (std::string_view(name) == "whitespace") continue;
    SCOPED_TRACE(name);
    const PreTokenizer p(name);
    std::string joined;
    for (std::string_view s : p.split(text)) {
      EXPECT_FALSE(s.empty());
      joined += s;
    }
    EXPECT_EQ(joined, text);
    EXPECT_TRUE(p.split("").empty());
  }
}

TEST(PreTokenizerFamilies, RefusesUnknownNamesAndTheWhitespaceModel) {
  try {
    PreTokenizer p("no-such-pre");
    FAIL() << "accepted an unknown pre-tokenizer";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown pre-tokenizer 'no-such-pre'"), std::string::npos) << what;
    EXPECT_NE(what.find("llama-bpe"), std::string::npos) << what;
    EXPECT_NE(what.find("gpt-4o"), std::string::npos) << what;
  }
  try {
    PreTokenizer p("whitespace");
    FAIL() << "accepted the whitespace pre-tokenizer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'whitespace' (tokenizer.ggml.pre) is not supported"),
              std::string::npos)
        << e.what();
  }
}

TEST(PreTokenizerFamilies, DigitGroupingFromTheRight) {
  // superbpe by an empty lookahead match, afmoe and tiny_aya by lookaheads.
  for (const char* pre : {"superbpe", "afmoe", "tiny_aya"}) {
    EXPECT_EQ(split(pre, "1234567"), (Pieces{"1", "234", "567"})) << pre;
  }
  EXPECT_EQ(split("llama-bpe", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("qwen2", "123"), (Pieces{"1", "2", "3"}));
}

TEST(PreTokenizerFamilies, CasedWordsAsInTokenizerJson) {
  // gpt-4o's tokenizer.json: a lower-case letter ends an upper-then-lower
  // word, and combining marks count as letters (llama.cpp's std::regex
  // rewrite would give "a\xC3\x89b" and split the Devanagari marks off).
  EXPECT_EQ(split("gpt-4o", "a\xC3\x89" "b"), (Pieces{"a", "\xC3\x89" "b"}));
  EXPECT_EQ(split("gpt-4o", "HTTPServer"), (Pieces{"HTTPServer"}));
  const std::string namaste = "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87";
  EXPECT_EQ(split("gpt-4o", namaste), (Pieces{namaste}));
  EXPECT_EQ(split("tekken", "don't"), (Pieces{"don", "'t"}));
  EXPECT_EQ(split("gpt-4o", "don't"), (Pieces{"don't"}));
}

TEST(PreTokenizerFamilies, ScriptsAndPunctuation) {
  const std::string han = "\xE4\xB8\xAD\xE6\x96\x87";  // 中文
  EXPECT_EQ(split("deepseek-v3", "abc" + han + "123456"), (Pieces{"abc", han, "123", "456"}));
  EXPECT_EQ(split("kimi-k2", han + "world"), (Pieces{han, "world"}));
  EXPECT_EQ(split("deepseek-llm", "Hello" + han), (Pieces{"Hello", han}));
  // Bloom: '(' '|' ')' belong to the excluded class, as Oniguruma reads it.
  EXPECT_EQ(split("bloom", "hello, world(x)"), (Pieces{"hello", ",", " world", "(", "x", ")"}));
  // Chameleon: later regexes split every earlier piece, so digits and
  // punctuation come apart even inside a sentinel, as in llama.cpp.
  EXPECT_EQ(split("chameleon", "<sentinel:12>ab"),
            (Pieces{"<", "sentinel", ":", "1", "2", ">", "ab"}));
  EXPECT_EQ(split("gemma4", "a\n\nb c"), (Pieces{"a", "\n\n", "b c"}));
}

TEST(PreTokenizerFamilies, FlagsLlamaCppSets) {
  EXPECT_TRUE(PreTokenizer("llama-bpe").ignore_merges());
  EXPECT_TRUE(PreTokenizer("llama-bpe").add_bos_default());
  EXPECT_TRUE(PreTokenizer("tekken").add_bos_default());
  EXPECT_TRUE(PreTokenizer("chameleon").add_bos_default());
  EXPECT_TRUE(PreTokenizer("minicpm5").ignore_merges());
  EXPECT_FALSE(PreTokenizer("dbrx").ignore_merges());
  EXPECT_FALSE(PreTokenizer("qwen2").add_bos_default());
  EXPECT_FALSE(PreTokenizer("gpt-4o").add_bos_default());
  EXPECT_TRUE(PreTokenizer("gpt-4o").byte_encode());
  EXPECT_FALSE(PreTokenizer("gemma4").byte_encode());
  EXPECT_FALSE(PreTokenizer("sarvam-moe").byte_encode());
  EXPECT_EQ(PreTokenizer("").family(), "default");
  EXPECT_EQ(PreTokenizer("hunyuan-dense").family(), "deepseek3-llm");
}

}  // namespace
}  // namespace nexus::tok
