// Matcher: where a generation stands in a grammar, and which tokens may come
// next.
//
// The parse state is a set of stacks (the pushdown reading of llama.cpp's
// llama-grammar.cpp): each stack lists the grammar positions still to be
// matched, innermost on top; every top is a byte class (rule references are
// expanded into their alternatives at once, so ambiguity becomes several
// stacks); the empty stack means the input so far is a complete sentence.
//
// Stacks are interned as frames (position, parent frame), so a stack is one
// integer and stacks share their common bottoms; sets of stacks are interned
// as states. A state's transition on a byte is computed once and kept: the
// matcher builds, lazily, the deterministic automaton of the grammar over
// the input it actually meets (subset construction on demand). Walking the
// vocabulary trie for a mask then costs one table lookup per trie edge. A
// state's transitions are computed together at its first use (bytes that
// the same stacks take share one subset construction).
//
// Masks (XGrammar's split, adapted to the DFA): a state that loops on many
// bytes (inside a string: every byte but '"', '\\' and non-ASCII) allows
// every token made of those bytes, whatever the context; that token set is
// computed once per byte set and vocabulary (VocabTrie::loop_index) and
// copied, and only the tokens that leave the loop (through a quote, an
// escape, a multi-byte character) are walked from where they leave. Other
// states walk the trie, pruned by the bytes they take. Masks are kept per
// state in the automaton, which matchers of one grammar share (Automaton
// below), so a repeat state, also one an earlier request met, costs a copy.
//
// Bounds: more than kMaxStacks stacks in one state (a grammar too ambiguous
// to follow) or more than kMaxStates states make accept() and
// allowed_tokens() throw GrammarLimit. check_followable() meets most such
// grammars before generation (a request's validation).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_set.h"
#include "grammar/vocab_trie.h"

namespace nexus::grammar {

constexpr size_t kMaxStacks = 4096;
constexpr size_t kMaxStates = 1 << 17;

// A grammar past kMaxStacks or kMaxStates: the grammar's fault (a client's
// 400), not the server's.
class GrammarLimit : public Error {
 public:
  using Error::Error;
};

// What the matcher will need, checked before generation: the start state,
// the expansion of every rule reference (up to kCheckExpansions stacks in
// all), and the automaton's first kCheckStates states breadth-first (every
// byte of each). Throws GrammarLimit naming the bound; milliseconds for the
// grammars of real schemas. A grammar that passes can still meet a bound
// deep in an output (a state the walk did not reach), which then throws
// GrammarLimit from accept() / allowed_tokens(). Thread-safe; a grammar
// that passed once (by content) passes again at the cost of hashing it (the
// last kCheckCacheEntries are kept).
constexpr size_t kCheckStates = 64;
constexpr size_t kCheckExpansions = size_t{1} << 20;
constexpr size_t kCheckCacheEntries = 4096;
void check_followable(std::shared_ptr<const Grammar> g);
// The walk itself, uncached.
void check_walk(std::shared_ptr<const Grammar> g);

// The lazy automaton of one grammar over one vocabulary: the interned
// frames and states, the transitions and the masks found so far. Matchers of
// the same grammar share one (an engine keeps one per grammar text,
// automaton_cache.h), so a request meets the states earlier requests
// computed; every call takes its mutex. Masks are kept per state, each in
// its smallest form (token_set.h), until they total kMaskCacheBytes, then
// all are dropped and computed again as needed.
class Automaton {
 public:
  static constexpr size_t kMaskCacheBytes = size_t{16} << 20;

  Automaton(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab);
  size_t n_states() const;
  const Grammar& grammar() const { return *g_; }
  const VocabTrie& vocab() const { return *vocab_; }

 private:
  friend class Matcher;
  friend void check_walk(std::shared_ptr<const Grammar> g);
  using Pos = uint64_t;  // rule << 32 | alternative << 16 | element index
  static constexpr int32_t kBottom = 0;  // the frame below every stack: the empty stack
  static constexpr int32_t kDead = -1, kUnknown = -2;

  struct Frame {
    Pos pos;
    int32_t parent;
  };
  struct State {
    std::vector<int32_t> stacks;  // sorted frame ids (kBottom: the empty stack)
    ByteSet firsts;               // bytes some stack takes
  };
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };

  // All below: mu_ held.
  int32_t frame(Pos p, int32_t parent);
  const std::vector<int32_t>& expand(int32_t f);
  int32_t state(std::vector<int32_t> stacks);
  int32_t next(int32_t s, uint8_t byte);
  int32_t step(int32_t s, uint8_t byte);
  void fill_row(int32_t s);
  const ByteSet& set_at(Pos p) const;
  void walk(uint32_t node, int32_t s, std::vector<uint64_t>& mask);
  void take_edge(uint32_t edge, int32_t s, std::vector<uint64_t>& mask);
  std::vector<uint64_t> compute_mask(int32_t s);
  void mask(int32_t s, std::vector<uint64_t>& out);  // kept, or computed and kept
  bool can_end(int32_t s) const;
  bool done(int32_t s) const;

  mutable std::mutex mu_;
  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const VocabTrie> vocab_;
  int32_t start_ = 0;
  std::vector<Frame> frames_;
  std::unordered_map<Pos, std::unordered_map<int32_t, int32_t>> frame_ids_;
  std::vector<std::vector<int32_t>> expanded_;
  std::vector<char> expanded_done_;
  std::vector<State> states_;
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> state_ids_;
  std::vector<std::array<int32_t, 256>> trans_;
  std::vector<char> row_done_;  // fill_row() ran for the state
  std::unordered_map<int32_t, TokenSet> masks_;
  size_t mask_bytes_ = 0;
};

class Matcher {
 public:
  // A matcher with an automaton of its own. Both are shared (several
  // matchers may use one grammar and one trie).
  Matcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab);
  // A matcher at the start of `shared`, which other matchers may use too (a
  // copy of a matcher shares its automaton as well).
  explicit Matcher(std::shared_ptr<Automaton> shared);

  // Bitmask over the vocabulary (bit id % 64 of word id / 64): the tokens
  // whose whole piece the grammar accepts from here. End-of-generation
  // tokens are the caller's business (allowed when can_end()). Valid until
  // the next call on this matcher (a copy of the automaton's kept mask).
  const std::vector<uint64_t>& allowed_tokens();

  // The input so far is a complete sentence of the grammar.
  bool can_end() const;
  // Nothing but the end can follow (the only stack left is the empty one).
  bool done() const;

  // Advances by `bytes`; returns false (and changes nothing) when the
  // grammar rejects them.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would succeed, without advancing (it may add
  // kept transitions); for checks of single tokens.
  bool allows(std::string_view bytes);

  const VocabTrie& vocab() const { return a_->vocab(); }

 private:
  std::shared_ptr<Automaton> a_;
  int32_t current_ = 0;  // state id in a_
  std::vector<uint64_t> mask_;
};

}  // namespace nexus::grammar
