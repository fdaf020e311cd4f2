// Grammar masks and their caches: the loop index (tokens decided once per
// byte set), each state's transitions computed together, the masks kept per
// state in an automaton shared by matchers, and the engine's automaton per
// grammar text, all checked against single-token checks (allows(), which
// uses no mask machinery) and against fresh matchers on random walks, on a
// synthetic vocabulary and on TinyLLama-v0's 32000 tokens.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "grammar/automaton_cache.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/loop_index.h"
#include "grammar/token_set.h"
#include "grammar/matcher.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace nexus::grammar {
namespace {

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string","maxLength":12},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":3},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}},
             "required":["street"]},
  "active":{"type":"boolean"},"role":{"enum":["admin","user","guest"]},"id":{"type":"string","format":"uuid"}},
  "required":["name","age","tags","address","active"]})";

std::shared_ptr<const Grammar> gbnf(const std::string& text) { return std::make_shared<Grammar>(parse_gbnf(text)); }

bool bit(const std::vector<uint64_t>& mask, size_t id) { return id / 64 < mask.size() && ((mask[id / 64] >> (id % 64)) & 1); }

// Pieces made of JSON fragments, quotes, escapes and UTF-8 bytes (whole
// characters and lone lead / continuation bytes), some empty.
std::vector<std::string> synthetic_vocab(size_t n, uint32_t seed) {
  static const std::vector<std::string> kParts = {
      "a", "b", "e", "x", "u", " ", "  ", "\"", "\\", "\\u", ":", ",", "{", "}", "[", "]", "0", "1", "9", "-", ".",
      "true", "null", "fal", "se", "\n", "\t", "\xC3", "\xA9", "\xC3\xA9", "\xE2\x98\x83", "00e9", "name", "age",
      "\": ", ", \"", "ad", "min", "user", "\x01", "/", "T", "Z", "+"};
  std::mt19937 rng(seed);
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const std::string& p : kParts)
    if (seen.insert(p).second) out.push_back(p);
  while (out.size() < n) {
    std::string p;
    const int parts = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < parts; ++i) p += kParts[rng() % kParts.size()];
    if (seen.insert(p).second) out.push_back(p);
  }
  for (size_t i = 7; i < out.size(); i += 97) out[i].clear();  // control tokens: never allowed
  return out;
}

// Walks `steps` random allowed tokens; at each step the mask must equal the
// single-token checks of a stride of the vocabulary, and every 7 steps a
// fresh matcher (its own automaton, and a new trie where fresh_trie, so no
// cached loop index either) replaying the same tokens must give the same mask.
void random_walks(const std::shared_ptr<const Grammar>& g, const std::vector<std::string>& pieces, int walks, int steps,
                  uint32_t seed, size_t check_stride = 1, bool fresh_trie = true) {
  const auto vocab = std::make_shared<VocabTrie>(pieces);
  // Every walk shares one automaton: later walks meet states (and masks)
  // earlier ones computed, as requests of one grammar do in the engine.
  const auto shared = std::make_shared<Automaton>(g, vocab);
  std::mt19937 rng(seed);
  int checked = 0;
  for (int w = 0; w < walks; ++w) {
    Matcher m(shared);
    std::vector<std::string> history;
    for (int step = 0; step < steps; ++step) {
      const std::vector<uint64_t> mask = m.allowed_tokens();
      EXPECT_EQ(m.allowed_tokens(), mask);  // cached: the same
      std::vector<size_t> allowed;
      for (size_t id = 0; id < pieces.size(); ++id) {
        if (bit(mask, id)) allowed.push_back(id);
        if (id % check_stride != static_cast<size_t>(step) % check_stride) continue;
        const bool expect = !pieces[id].empty() && m.allows(pieces[id]);
        ASSERT_EQ(bit(mask, id), expect) << "walk " << w << " step " << step << " token " << id << " '" << pieces[id]
                                         << "' after '" << [&] {
                                              std::string s;
                                              for (const auto& h : history) s += h;
                                              return s;
                                            }() << "'";
        ++checked;
      }
      if (step % 7 == 3) {
        Matcher fresh(g, fresh_trie ? std::make_shared<VocabTrie>(pieces) : vocab);
        for (const std::string& h : history) ASSERT_TRUE(fresh.accept(h));
        EXPECT_EQ(fresh.allowed_tokens(), mask) << "walk " << w << " step " << step;
      }
      if (allowed.empty()) break;
      const std::string& piece = pieces[allowed[rng() % allowed.size()]];
      ASSERT_TRUE(m.accept(piece));
      history.push_back(piece);
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(GrammarMasks, LoopIndexSplitsEveryTokenOnce) {
  const std::vector<std::string> pieces = synthetic_vocab(800, 1);
  const VocabTrie vocab(pieces);
  ByteSet loop;
  for (int c = 0x20; c < 0x7F; ++c)
    if (c != '"' && c != '\\') loop.set(static_cast<size_t>(c));
  const LoopIndex index = build_loop_index(vocab, loop);
  // Tokens below each exit.
  std::vector<int> below(pieces.size(), 0);
  std::vector<uint32_t> todo;
  for (uint32_t e : index.exits) {
    EXPECT_FALSE(loop.test(vocab.edges()[e].byte));
    todo.push_back(vocab.edges()[e].node);
    while (!todo.empty()) {
      const VocabTrie::Node& n = vocab.nodes()[todo.back()];
      todo.pop_back();
      for (uint32_t t = 0; t < n.n_tokens; ++t) ++below[static_cast<size_t>(vocab.tokens()[n.first_token + t])];
      for (uint32_t k = 0; k < n.n_children; ++k) todo.push_back(vocab.edges()[n.first_child + k].node);
    }
  }
  int inside = 0;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].empty()) {
      EXPECT_FALSE(bit(index.inside, id));
      EXPECT_EQ(below[id], 0);
      continue;
    }
    bool all = true;
    for (unsigned char c : pieces[id]) all = all && loop.test(c);
    EXPECT_EQ(bit(index.inside, id), all) << pieces[id];
    EXPECT_EQ(below[id], all ? 0 : 1) << pieces[id];  // in exactly one part
    inside += all;
  }
  EXPECT_GT(inside, 10);
  // Cached per byte set: the same object for the same set.
  EXPECT_EQ(vocab.loop_index(loop), vocab.loop_index(loop));
  ByteSet other = loop;
  other.reset('a');
  EXPECT_NE(vocab.loop_index(loop), vocab.loop_index(other));
}

TEST(GrammarMasks, RandomWalksOnJsonObjectGrammar) {
  random_walks(gbnf(json_object_gbnf()), synthetic_vocab(1500, 2), 6, 60, 11);
}

TEST(GrammarMasks, RandomWalksOnCompiledSchema) {
  const auto g = std::make_shared<Grammar>(compile_json_schema(nlohmann::ordered_json::parse(kSchema)));
  random_walks(g, synthetic_vocab(1500, 3), 6, 80, 12);
}

TEST(GrammarMasks, RandomWalksOnLoopsOfEverySize) {
  // Loops on few bytes (walked whole), on many (the loop index), nested and
  // ambiguous ones (several stacks looping together).
  random_walks(gbnf(R"(root ::= [a-e]+ ( "," [ a-z]* )* "." | "\"" [^"\\]* "\"" [0-9]* | ( "a" | "ab" )* "x")"),
               synthetic_vocab(1200, 4), 8, 50, 13);
  random_walks(gbnf(R"(root ::= ( [^\x00-\x1F"] | "\\" ["\\nu] )* "\"" ( " " [^x]* )?)"), synthetic_vocab(1200, 5), 6,
               50, 14);
}

TEST(GrammarMasks, RandomWalksOnTinyLlamaVocabulary) {
  NEXUS_REQUIRE_SHARED(path, "TinyLLama-v0.F32.gguf");
  GgufFile gguf(path);
  auto tok = Tokenizer::from_gguf(gguf);
  std::vector<std::string> pieces(static_cast<size_t>(tok->n_vocab()));
  for (int32_t id = 0; id < tok->n_vocab(); ++id)
    if (!tok->is_eog(id)) pieces[static_cast<size_t>(id)] = tok->token_to_piece(id, false);
  const auto g = std::make_shared<Grammar>(compile_json_schema(nlohmann::ordered_json::parse(kSchema)));
  // Each step checks a fifth of the vocabulary (a different fifth each
  // step), so that the test stays quick.
  random_walks(g, pieces, 3, 40, 15, 5, false);
}

}  // namespace
}  // namespace nexus::grammar

namespace nexus::grammar {
namespace {

TEST(GrammarMasks, JsonStringsLoopOnTheBytesWarmedWithTheTrie) {
  const std::vector<std::string> pieces = synthetic_vocab(600, 6);
  const std::shared_ptr<const Grammar> json_object = gbnf(json_object_gbnf());
  const std::shared_ptr<const Grammar> schema =
      std::make_shared<Grammar>(compile_json_schema(nlohmann::ordered_json::parse(R"({"type":"string"})")));
  for (const auto& [g, prefix] : {std::pair{json_object, "{\"ab"}, std::pair{schema, "\"ab"}}) {
    SCOPED_TRACE(prefix);
    const auto vocab = std::make_shared<VocabTrie>(pieces);
    vocab->loop_index(json_string_loop_bytes());
    ASSERT_EQ(vocab->n_loop_indexes(), 1u);
    Matcher m(g, vocab);
    ASSERT_TRUE(m.accept(prefix));
    const std::vector<uint64_t> mask = m.allowed_tokens();  // inside a string
    EXPECT_TRUE(bit(mask, 0));  // "a"
    EXPECT_EQ(vocab->n_loop_indexes(), 1u);  // that state looped on exactly the warmed bytes
  }
}

}  // namespace
}  // namespace nexus::grammar

namespace nexus::grammar {
namespace {

TEST(GrammarMasks, AutomataAreSharedByGrammarTextAndVocabulary) {
  const auto vocab = std::make_shared<VocabTrie>(synthetic_vocab(300, 7));
  const auto other_vocab = std::make_shared<VocabTrie>(synthetic_vocab(300, 8));
  AutomatonCache cache(2);
  const auto a = cache.get(gbnf(json_object_gbnf()), vocab);
  EXPECT_EQ(cache.get(gbnf(json_object_gbnf()), vocab), a);  // parsed again: the same text
  EXPECT_NE(cache.get(gbnf(json_object_gbnf()), other_vocab), a);
  const auto b = cache.get(gbnf(R"(root ::= "a" [b-c]*)"), vocab);
  EXPECT_NE(b, a);
  EXPECT_NE(cache.get(gbnf(R"(root ::= "a" [b-d]*)"), vocab), b);  // another byte set
  EXPECT_EQ(grammar_key(*gbnf(R"(root ::= "a" [b-c]*)")), grammar_key(*gbnf(R"(root ::= "a" [b-c]*)")));
  EXPECT_NE(grammar_key(*gbnf(R"(root ::= "a" [b-c]*)")), grammar_key(*gbnf(R"(root ::= "a" [b-c]+)")));
  // Capacity 2: the JSON grammar over `vocab` was least recently used.
  EXPECT_NE(cache.get(gbnf(json_object_gbnf()), vocab), a);
}

TEST(GrammarMasks, MatchersOfOneAutomatonKeepTheirOwnPlace) {
  const std::vector<std::string> pieces = synthetic_vocab(500, 9);
  const auto vocab = std::make_shared<VocabTrie>(pieces);
  const auto g = gbnf(json_object_gbnf());
  const auto shared = std::make_shared<Automaton>(g, vocab);
  Matcher x(shared), y(shared);
  Matcher px(g, vocab), py(g, vocab);  // private automata
  const std::vector<std::string> dx = {"{\"", "a", "\":", " ", "[", "1", "]", "}"};
  const std::vector<std::string> dy = {"{\"", "ab", "\": ", "\"", "x\"", "}"};
  for (size_t i = 0; i < std::max(dx.size(), dy.size()); ++i) {  // interleaved
    EXPECT_EQ(x.allowed_tokens(), px.allowed_tokens()) << i;
    EXPECT_EQ(y.allowed_tokens(), py.allowed_tokens()) << i;
    EXPECT_EQ(x.can_end(), px.can_end());
    EXPECT_EQ(y.can_end(), py.can_end());
    if (i < dx.size()) ASSERT_TRUE(x.accept(dx[i]) && px.accept(dx[i])) << dx[i];
    if (i < dy.size()) ASSERT_TRUE(y.accept(dy[i]) && py.accept(dy[i])) << dy[i];
  }
  EXPECT_TRUE(x.can_end() && y.can_end());
  EXPECT_GT(shared->n_states(), 10u);
}

}  // namespace
}  // namespace nexus::grammar

namespace nexus::grammar {
namespace {

TEST(GrammarMasks, TokenSetsKeepTheSmallestFormAndGiveTheBitsBack) {
  std::mt19937 rng(21);
  for (int32_t n : {1, 63, 64, 65, 1000, 32000}) {
    for (double density : {0.0, 0.001, 0.02, 0.5, 0.98, 0.999, 1.0}) {
      std::vector<uint64_t> bits((static_cast<size_t>(n) + 63) / 64, 0);
      size_t count = 0;
      for (int32_t id = 0; id < n; ++id)
        if (std::uniform_real_distribution<double>(0, 1)(rng) < density || density == 1.0) {
          bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
          ++count;
        }
      const TokenSet set(bits, n);
      std::vector<uint64_t> back = {42};  // overwritten whatever it held
      set.to_bits(back);
      EXPECT_EQ(back, bits) << n << " " << density;
      const size_t as_bits = bits.size() * 8;
      if (count * 4 < as_bits && count <= static_cast<size_t>(n) - count) {
        EXPECT_EQ(set.form(), TokenSet::Form::Allowed) << n << " " << density;
      } else if ((static_cast<size_t>(n) - count) * 4 < as_bits) {
        EXPECT_EQ(set.form(), TokenSet::Form::Rejected) << n << " " << density;
      } else {
        EXPECT_EQ(set.form(), TokenSet::Form::Bits) << n << " " << density;
      }
    }
  }
  // The forms are all met on a 32k vocabulary.
  std::vector<uint64_t> few(500, 0), most(500, ~uint64_t{0}), half(500, 0x5555555555555555ull);
  few[3] = 1;
  most[7] = 0;
  EXPECT_EQ(TokenSet(few, 32000).form(), TokenSet::Form::Allowed);
  EXPECT_EQ(TokenSet(most, 32000).form(), TokenSet::Form::Rejected);
  EXPECT_EQ(TokenSet(half, 32000).form(), TokenSet::Form::Bits);
}

}  // namespace
}  // namespace nexus::grammar
