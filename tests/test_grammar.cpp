// Grammars: GBNF parsing, UTF-8 classes, the matcher's accept and its token
// masks (against a brute-force check of every token).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/utf8_classes.h"
#include "util/error.h"

namespace nexus::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf(const std::string& text) { return std::make_shared<Grammar>(parse_gbnf(text)); }

std::shared_ptr<const VocabTrie> trie(const std::vector<std::string>& pieces) {
  return std::make_shared<VocabTrie>(pieces);
}

// Whether the whole `text` is a sentence of `g`.
bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g, trie({"x"}));
  return m.accept(text) && m.can_end();
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

TEST(Grammar, LiteralsAlternativesGroupsAndRepetitions) {
  const auto g = gbnf(R"(
root ::= greeting (" " name)? "!"{1,3}   # a comment
greeting ::= "hi" | "hello"
name ::= [a-z]+
)");
  for (const char* ok : {"hi!", "hello bob!!!", "hi x!!"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"hi", "hi!!!!", "hey!", "hello Bob!", "hi  bob!", ""}) EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(Grammar, AlternativesMayContinueOnTheNextLine) {
  const auto g = gbnf("root ::= \"a\"\n  | \"b\"\nother ::= \"c\"\n");
  EXPECT_TRUE(matches(g, "a"));
  EXPECT_TRUE(matches(g, "b"));
  EXPECT_FALSE(matches(g, "c"));
}

TEST(Grammar, ExactRepetitionCounts) {
  const auto g = gbnf(R"(root ::= [0-9]{2} "-" [0-9]{2,} "-" [ab]{0,2})");
  EXPECT_TRUE(matches(g, "12-34-"));
  EXPECT_TRUE(matches(g, "12-34567-ab"));
  EXPECT_FALSE(matches(g, "1-34-"));
  EXPECT_FALSE(matches(g, "12-3-"));
  EXPECT_FALSE(matches(g, "12-34-aba"));
}

TEST(Grammar, Utf8ClassesMatchExactlyTheirCodePoints) {
  // Classes with ranges across every encoded length and the surrogate gap.
  std::mt19937 rng(7);
  const std::vector<std::vector<CodeRange>> cases = {
      {{0x41, 0x5A}}, {{0x7F, 0x80}}, {{0x7FF, 0x800}}, {{0xD7FF, 0xE000}}, {{0xFFFF, 0x10000}},
      {{0x10FFFE, 0x10FFFF}}, {{0x20, 0x10FFFF}}, {{0x3B1, 0x3C9}, {0x4E00, 0x9FFF}, {0x1F600, 0x1F64F}}};
  for (const auto& c : cases) {
    const auto n = normalize(c);
    const auto seqs = utf8_sequences(n);
    Grammar g;
    const uint32_t r = g.add_rule("root");
    for (const auto& s : seqs) {
      Sequence q;
      for (const ByteSet& b : s) q.push_back(Element{Element::Bytes, g.add_set(b)});
      g.rules[r].alternatives.push_back(q);
    }
    const auto gp = std::make_shared<Grammar>(g);
    auto in = [&](uint32_t cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) return false;
      for (auto [lo, hi] : n)
        if (cp >= lo && cp <= hi) return true;
      return false;
    };
    std::vector<uint32_t> probes = {0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
    for (auto [lo, hi] : c) {
      for (uint32_t d : {0u, 1u}) {
        probes.push_back(lo - d);
        probes.push_back(hi + d);
      }
    }
    for (int i = 0; i < 2000; ++i) probes.push_back(rng() % 0x110000);
    for (uint32_t cp : probes) {
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
      EXPECT_EQ(matches(gp, utf8(cp)), in(cp)) << std::hex << cp;
    }
  }
  EXPECT_TRUE(matches(gbnf(R"(root ::= [^a] [^"\\]*)"), "é\xE2\x82\xAC" "b"));  // é € b
  EXPECT_FALSE(matches(gbnf(R"(root ::= [^a])"), "a"));
  EXPECT_TRUE(matches(gbnf(R"(root ::= "\u00e9\x41")"), "\xC3\xA9" "A"));
}

TEST(Grammar, JsonObjectGrammar) {
  const auto g = gbnf(json_object_gbnf());
  for (const char* ok : {R"({})", R"({"a": 1})", R"({"a": [1, -2.5e3, true, null, "x\n\u00e9"], "b": {}})",
                         "{\n  \"k\": \"v\"\n}", R"({"é": "☃"})"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {R"([])", R"({"a": 01})", R"({"a" 1})", R"({'a': 1})", R"({"a": 1,})", "{\"a\": \"\x01\"}",
                          R"({"a": tru})", R"("x")"})
    EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(Grammar, MaskEqualsBruteForceOverEveryToken) {
  const auto g = gbnf(json_object_gbnf());
  const std::vector<std::string> pieces = {"{", "}", "{\"", "\"", "\":", " ", "a", "ab", "1", "12", "-", ".", "e",
                                           "true", "tr", "null", ",", ", \"", "[", "]", "\\", "\\u", "00e9", "",
                                           "\n", "\xC3", "\xA9", "\xC3\xA9", "x\"", "}}", "{}", "\x01"};
  const auto vocab = trie(pieces);
  Matcher m(g, vocab);
  // Walk a document token by token; at each step the mask must equal what
  // accept() says of each token on a copy of the matcher.
  const std::vector<std::string> doc = {"{\"", "a", "\":", " ", "[", "1", "2", ",", " ", "\"", "\xC3", "\xA9",
                                        "\\u", "00e9", "\"", "]", "}"};
  for (size_t step = 0; step <= doc.size(); ++step) {
    const std::vector<uint64_t> mask = m.allowed_tokens();
    for (size_t id = 0; id < pieces.size(); ++id) {
      Matcher copy = m;
      const bool expect = !pieces[id].empty() && copy.accept(pieces[id]);
      EXPECT_EQ(((mask[id / 64] >> (id % 64)) & 1) != 0, expect) << "step " << step << " token '" << pieces[id] << "'";
    }
    if (step < doc.size()) {
      ASSERT_TRUE(m.accept(doc[step])) << doc[step];
    }
  }
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.done());  // trailing whitespace may still come
  EXPECT_TRUE(m.accept("\n"));
}

TEST(Grammar, RejectedBytesLeaveTheStateAsItWas) {
  Matcher m(gbnf(R"(root ::= "ab" "c"?)"), trie({"a", "b", "c"}));
  EXPECT_FALSE(m.accept("ac"));
  EXPECT_TRUE(m.accept("a"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.done());
  EXPECT_TRUE(m.accept("c"));
  EXPECT_TRUE(m.done());
  EXPECT_EQ(m.allowed_tokens()[0], 0u);
}

TEST(Grammar, BadGrammarsAreClearErrors) {
  auto error_of = [](const std::string& text) {
    try {
      parse_gbnf(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("root ::= foo").find("'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"").find("no 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x \"a\"\nx ::= \"\" | root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("root ::= [a-").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{5000}").find("repetition bound"), std::string::npos);
  EXPECT_NE(error_of("root ::= ((\"a\")").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("backwards"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"**").find("repetition of a repetition"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= x{1000}\nx ::= y{1000}\ny ::= \"a\"{1000}").find("no error"), std::string::npos);
}

TEST(Grammar, HostileTextNeverCrashes) {
  std::mt19937 rng(11);
  const std::string alphabet = "root::=\"ab\\[]^-()|*+?{},0123 \n#.xu";
  for (int i = 0; i < 3000; ++i) {
    std::string t = "root ::= ";
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) t += alphabet[rng() % alphabet.size()];
    try {
      const auto g = gbnf(t);
      Matcher m(g, trie({"a", "b", "ab", "x"}));
      m.allowed_tokens();
      m.accept("ab");
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace nexus::grammar
