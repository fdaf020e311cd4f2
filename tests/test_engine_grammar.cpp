// Grammar requests in the Engine: the vocabulary trie is built on a worker
// at the first grammar request, which waits unadmitted meanwhile; other
// sequences go on, and every request gets exactly one final event, also when
// the engine stops while the trie is still being built (TinyLLama-v0: a
// 32000-token vocabulary, so the build takes a while).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "support/event_collector.h"
#include "support/loaded_model.h"
#include "support/test_support.h"

using namespace nexus;

namespace {

using nexus::test::EventCollector;
using nexus::test::into;

constexpr const char* kGbnf = R"(root ::= ("yes" | "no") "," [ a-z]{1,30} ".")";

#define LOAD_TINY(var)                                       \
  NEXUS_REQUIRE_SHARED(var##_path, "TinyLLama-v0.F32.gguf"); \
  nexus::test::LoadedModel& var = nexus::test::loaded_model(var##_path)

GenerationRequest request(const nexus::test::LoadedModel& m, int32_t max_tokens, bool grammar) {
  GenerationRequest r;
  r.prompt = m.tok->encode("Once upon a time, there was a little", true);
  r.sampling.temperature = 0;
  r.stop.max_tokens = max_tokens;
  if (grammar) r.grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(kGbnf));
  return r;
}

// Whether `text` is a prefix of a sentence of kGbnf (complete: a sentence).
bool follows(const std::string& text, bool complete) {
  grammar::Matcher m(std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(kGbnf)),
                     std::make_shared<grammar::VocabTrie>(std::vector<std::string>{"x"}));
  return m.accept(text) && (!complete || m.can_end());
}

EngineOptions opts() {
  EngineOptions o;
  o.n_threads = 1;
  o.n_ctx = 0;  // the model's: 128
  return o;
}

TEST(EngineGrammar, GrammarRequestsWaitForTheTrieWhileOthersDecode) {
  LOAD_TINY(m);
  // The reference: the plain request alone, on its own engine.
  std::vector<int32_t> alone;
  {
    Engine e(m.model, *m.tok, opts());
    auto c = std::make_shared<EventCollector>();
    ASSERT_NE(e.submit(request(m, 40, false), into(c)), nullptr);
    ASSERT_TRUE(c->wait());
    alone = c->tokens;
  }
  Engine e(m.model, *m.tok, opts());
  auto plain = std::make_shared<EventCollector>();
  ASSERT_NE(e.submit(request(m, 40, false), into(plain)), nullptr);
  std::vector<std::shared_ptr<EventCollector>> constrained;
  for (int i = 0; i < 3; ++i) {  // all three arrive before the trie is built (most likely), and wait for it
    constrained.push_back(std::make_shared<EventCollector>());
    ASSERT_NE(e.submit(request(m, 40, true), into(constrained.back())), nullptr);
  }
  ASSERT_TRUE(plain->wait());
  EXPECT_EQ(plain->tokens, alone);  // greedy: untouched by the grammar requests beside it
  for (const auto& c : constrained) {
    ASSERT_TRUE(c->wait());
    EXPECT_EQ(c->finals, 1);
    ASSERT_NE(c->final_event.finish, FinishReason::Error) << c->final_event.error;
    EXPECT_TRUE(follows(c->text, c->final_event.finish == FinishReason::Stop)) << c->text;
    EXPECT_EQ(c->text, constrained[0]->text);  // greedy, same prompt
  }
  // Later grammar requests reuse the trie.
  auto later = std::make_shared<EventCollector>();
  ASSERT_NE(e.submit(request(m, 40, true), into(later)), nullptr);
  ASSERT_TRUE(later->wait());
  EXPECT_EQ(later->text, constrained[0]->text);
}

TEST(EngineGrammar, StoppingWhileTheTrieIsBuiltEndsEveryRequestOnce) {
  LOAD_TINY(m);
  std::vector<std::shared_ptr<EventCollector>> cs;
  {
    Engine e(m.model, *m.tok, opts());
    for (int i = 0; i < 4; ++i) {
      cs.push_back(std::make_shared<EventCollector>());
      ASSERT_NE(e.submit(request(m, 80, i % 2 == 0), into(cs.back())), nullptr);
    }
  }  // destroyed at once: the grammar requests most likely still wait for the trie
  for (const auto& c : cs) {
    ASSERT_TRUE(c->wait(10));
    EXPECT_EQ(c->finals, 1);
    EXPECT_NE(c->final_event.finish, FinishReason::Error) << c->final_event.error;
  }
}

}  // namespace
