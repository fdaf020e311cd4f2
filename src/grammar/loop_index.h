// LoopIndex: the vocabulary split by a set of bytes L, for masks of grammar
// states that loop on L (next(S, b) == S for every b in L: inside a JSON
// string, L is every printable ASCII byte but '"' and '\\').
//
// For such a state every token made only of L bytes is allowed (the state
// stays S byte after byte), whatever the grammar around it: those tokens
// are decided once per L and kept as a bitset (`inside`, XGrammar's
// context-independent tokens). Every other token has a first byte outside
// L; the trie edge of that byte (from a node reached by L bytes only) is an
// exit, and only the subtrees below the exits are walked at run time, from
// the state that byte leads to (the context-dependent tokens). A token is
// in exactly one of the two parts, so
//   mask(S) = inside | walk of each exit e from next(S, e.byte)
// is the mask the whole trie walk gives.
//
// Built in one pass over the L part of the trie; immutable. Cached per L by
// VocabTrie::loop_index().
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace nexus::grammar {

class VocabTrie;

struct LoopIndex {
  std::vector<uint64_t> inside;  // bit id % 64 of word id / 64: the tokens made only of L bytes
  std::vector<uint32_t> exits;   // indices into VocabTrie::edges(): byte not in L, above it L bytes only
};

LoopIndex build_loop_index(const VocabTrie& vocab, const ByteSet& loop);

// The bytes a state inside a JSON string loops on: the string character
// class of json_schema.cpp, [^"\\\x00-\x1F], less the
// bytes >= 0x80 (they start or continue multi-byte characters, other
// states): 0x20-0x7F but '"' and '\\'. Whoever builds a trie for serving
// builds this index with it (10-20 ms for 32k tokens), so that the first
// JSON string of the first request does not pay it.
ByteSet json_string_loop_bytes();

}  // namespace nexus::grammar
