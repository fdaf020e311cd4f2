// AutomatonCache: one grammar Automaton (matcher.h) per grammar text, so that
// requests with the same schema or GBNF share the states, transitions and
// masks earlier requests computed (a repeat state costs a copy of its mask,
// also in a new request). Grammars are compared by content (rules, byte
// sets, root), not by pointer: every request compiles its own Grammar.
//
// At most `capacity` grammars, least recently used dropped first. An
// automaton that has grown past kMaxStates / 4 states is not handed out
// again (the next request of that grammar gets a fresh one), so that a
// shared automaton leaves every request most of the state bound. One
// thread (the engine's) calls get(); the automata themselves lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace nexus::grammar {

// The grammar's content as a byte string (equal exactly when the grammars are).
std::string grammar_key(const Grammar& g);

class AutomatonCache {
 public:
  explicit AutomatonCache(size_t capacity = 8) : capacity_(capacity) {}

  // Throws what Automaton's constructor throws (a rule too long).
  std::shared_ptr<Automaton> get(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const VocabTrie>& vocab);

 private:
  struct Entry {
    std::string key;
    const VocabTrie* vocab;
    std::shared_ptr<Automaton> automaton;
    uint64_t used;
  };
  size_t capacity_;
  uint64_t uses_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace nexus::grammar
