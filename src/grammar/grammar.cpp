#include "grammar/grammar.h"

#include <functional>

#include "util/error.h"

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
  // Left recursion: r reaches itself through leading elements that may be empty.
  std::vector<int> state(g.rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::function<void(uint32_t)> visit = [&](uint32_t r) {
    if (state[r] == 2) return;
    if (state[r] == 1) throw LeftRecursion(g.rules[r].name);
    state[r] = 1;
    for (const Sequence& s : g.rules[r].alternatives)
      for (const Element& e : s) {
        if (e.kind != Element::Rule) break;
        visit(e.index);
        if (!nullable[e.index]) break;
      }
    state[r] = 2;
  };
  for (uint32_t r = 0; r < g.rules.size(); ++r) visit(r);
}

}  // namespace nexus::grammar
