#include "grammar/grammar.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.h"
#include "util/json_depth.h"

namespace nexus::grammar {

uint32_t Grammar::add_set(const ByteSet& s) {
  for (uint32_t i = 0; i < sets.size(); ++i)
    if (sets[i] == s) return i;
  sets.push_back(s);
  return static_cast<uint32_t>(sets.size() - 1);
}

uint32_t Grammar::add_rule(std::string name) {
  rules.push_back(Rule{std::move(name), {}});
  return static_cast<uint32_t>(rules.size() - 1);
}

namespace {

// Left recursion (r reaches itself through leading elements that may be
// empty) and the nesting of leading references (r's first element is a rule
// whose first element is a rule ...: the depth the matcher's expansion
// recurses to), in one walk with an explicit stack: a chain of 10,000 rules
// must cost a refusal, not the caller's stack.
void check_leading_references(const Grammar& g, const std::vector<bool>& nullable) {
  const int max_nesting = max_json_depth();
  enum : uint8_t { kNew, kOnPath, kDone };
  std::vector<uint8_t> state(g.rules.size(), kNew);
  std::vector<int> depth(g.rules.size(), 0);  // of a kDone rule: its longest chain of leading references
  struct Walk {
    uint32_t rule;
    size_t alt = 0, elem = 0;
  };
  std::vector<Walk> path;
  for (uint32_t root = 0; root < g.rules.size(); ++root) {
    if (state[root] != kNew) continue;
    path.push_back(Walk{root});
    state[root] = kOnPath;
    while (!path.empty()) {
      Walk& w = path.back();
      const std::vector<Sequence>& alts = g.rules[w.rule].alternatives;
      if (w.alt == alts.size()) {
        state[w.rule] = kDone;
        path.pop_back();
        continue;
      }
      const Sequence& seq = alts[w.alt];
      if (w.elem == seq.size() || seq[w.elem].kind != Element::Rule) {
        ++w.alt;
        w.elem = 0;
        continue;
      }
      const uint32_t child = seq[w.elem].index;
      if (state[child] == kOnPath) throw LeftRecursion(g.rules[child].name);
      if (state[child] == kNew) {
        state[child] = kOnPath;
        path.push_back(Walk{child});  // w is not used again before this returns; then child is kDone
        continue;
      }
      depth[w.rule] = std::max(depth[w.rule], depth[child] + 1);
      if (depth[w.rule] > max_nesting)
        throw Error(fmt::format("grammar: rule '{}' nests leading rule references more than {} levels deep",
                                g.rules[w.rule].name, max_nesting));
      if (nullable[child]) ++w.elem;
      else {
        ++w.alt;
        w.elem = 0;
      }
    }
  }
}

}  // namespace

void check(const Grammar& g) {
  if (g.rules.empty() || g.root >= g.rules.size()) throw Error("grammar: no root rule");
  for (const Rule& r : g.rules)
    if (r.alternatives.empty()) throw Error("grammar: rule '" + r.name + "' has no alternative");
  // nullable[r]: r can match the empty string (fixed point).
  std::vector<bool> nullable(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Sequence& s : g.rules[r].alternatives) {
        bool all = true;
        for (const Element& e : s) all = all && e.kind == Element::Rule && nullable[e.index];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  check_leading_references(g, nullable);
}

}  // namespace nexus::grammar
