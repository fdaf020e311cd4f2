// A context-free grammar over bytes, the form constrained decoding runs on.
//
// Rules are alternatives of sequences of elements; an element is a byte
// class (one byte out of a 256-bit set) or a reference to a rule. Text
// grammars (gbnf.h) are written over Unicode code points; their character
// classes are compiled to UTF-8 byte sequences here (utf8_classes.h), so the
// matcher never sees a partial character: a token that ends inside a
// multi-byte character simply leaves the matcher in the middle of that
// sequence. Repetitions become helper rules (right-recursive, so stacks stay
// shallow). Left recursion is refused when the grammar is checked.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/error.h"

namespace nexus::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum Kind : uint8_t { Bytes, Rule } kind = Bytes;
  uint32_t index = 0;  // Bytes: into Grammar::sets; Rule: a rule id
};

using Sequence = std::vector<Element>;

struct Rule {
  std::string name;
  std::vector<Sequence> alternatives;  // an empty sequence matches the empty string
};

struct Grammar {
  std::vector<Rule> rules;
  std::vector<ByteSet> sets;
  uint32_t root = 0;

  uint32_t add_set(const ByteSet& s);  // deduplicated
  uint32_t add_rule(std::string name);  // an empty rule; returns its id
};

// A rule that reaches itself before matching a byte: its name, so that a
// caller who generated the grammar (json_schema.h) can say which part of
// its own input the rule came from.
class LeftRecursion : public Error {
 public:
  explicit LeftRecursion(std::string rule_name)
      : Error("grammar: rule '" + rule_name + "' is left-recursive"), rule(std::move(rule_name)) {}
  std::string rule;
};

// Throws LeftRecursion when a rule is left-recursive (directly or through
// rules that may match the empty string); nexus::Error naming the rule when
// a rule has no alternative, or when the root cannot be reached from
// anything (empty grammar), or when leading rule references (a rule whose
// first element is a rule whose first element is ...) chain deeper than
// util/json_depth.h's limit (the matcher's expansion recurses that deep).
void check(const Grammar& g);

}  // namespace nexus::grammar
