// Matcher: where a generation stands in a grammar, and which tokens may come
// next.
//
// The state is a set of stacks (the pushdown reading of llama.cpp's
// llama-grammar.cpp): each stack lists the grammar positions still to be
// matched, innermost last; every top is a byte class (rule references are
// expanded into their alternatives at once, so ambiguity becomes several
// stacks); an empty stack means the input so far is a complete sentence.
// accept() advances every stack by the bytes of a sampled token.
// allowed_tokens() walks the vocabulary trie from the current state, one
// advance per trie edge, pruning a subtree as soon as no stack survives.
// The mask of a state is cached (keyed by its stacks; within a JSON
// document the same states recur: inside a string, after a comma, ...), so
// a state costs the walk only the first time.
//
// Bounds: a state of more than kMaxStacks stacks (a grammar too ambiguous to
// follow) makes accept() and allowed_tokens() throw nexus::Error.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/vocab_trie.h"

namespace nexus::grammar {

constexpr size_t kMaxStacks = 4096;

class Matcher {
 public:
  // Both must outlive the matcher (shared_ptrs keep them).
  Matcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab);

  // Bitmask over the vocabulary (bit id % 64 of word id / 64): the tokens
  // whose whole piece the grammar accepts from here. End-of-generation
  // tokens are the caller's business (allowed when can_end()).
  const std::vector<uint64_t>& allowed_tokens();

  // The input so far is a complete sentence of the grammar.
  bool can_end() const;
  // Nothing but the end can follow (the only stack left is the empty one).
  bool done() const;

  // Advances by `bytes`; returns false (and changes nothing) when the
  // grammar rejects them.
  bool accept(std::string_view bytes);

  const VocabTrie& vocab() const { return *vocab_; }

  using Pos = uint64_t;  // rule << 32 | alternative << 16 | element index
  using Stack = std::vector<Pos>;

 private:
  void expand(Stack& s, std::vector<Stack>& out) const;
  void advance(const std::vector<Stack>& from, uint8_t byte, std::vector<Stack>& to) const;
  void walk(uint32_t node, const std::vector<Stack>& stacks, size_t depth, std::vector<uint64_t>& mask);
  static void dedupe(std::vector<Stack>& v);

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const VocabTrie> vocab_;
  std::vector<Stack> stacks_;
  std::vector<std::vector<Stack>> scratch_;  // per trie depth
  // Mask cache: state key -> mask, least recently used last out.
  std::list<std::pair<std::vector<Pos>, std::vector<uint64_t>>> lru_;
  std::unordered_map<size_t, std::vector<decltype(lru_)::iterator>> index_;
  const std::vector<uint64_t>* current_ = nullptr;
};

}  // namespace nexus::grammar
