#include "grammar/automaton_cache.h"

#include <algorithm>

namespace nexus::grammar {
namespace {

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

}  // namespace

std::string grammar_key(const Grammar& g) {
  std::string out;
  put_u32(out, g.root);
  put_u32(out, static_cast<uint32_t>(g.rules.size()));
  for (const Rule& r : g.rules) {
    put_u32(out, static_cast<uint32_t>(r.alternatives.size()));
    for (const Sequence& seq : r.alternatives) {
      put_u32(out, static_cast<uint32_t>(seq.size()));
      for (const Element& e : seq) put_u32(out, (e.index << 1) | (e.kind == Element::Rule ? 1u : 0u));
    }
  }
  put_u32(out, static_cast<uint32_t>(g.sets.size()));
  for (const ByteSet& s : g.sets)
    for (size_t w = 0; w < 256; w += 32) put_u32(out, static_cast<uint32_t>(((s >> w) & ByteSet(0xFFFFFFFFu)).to_ulong()));
  return out;
}

std::shared_ptr<Automaton> AutomatonCache::get(const std::shared_ptr<const Grammar>& g,
                                               const std::shared_ptr<const VocabTrie>& vocab) {
  std::string key = grammar_key(*g);
  ++uses_;
  for (Entry& e : entries_) {
    if (e.vocab != vocab.get() || e.key != key) continue;
    if (e.automaton->n_states() > kMaxStates / 4) e.automaton = std::make_shared<Automaton>(g, vocab);
    e.used = uses_;
    return e.automaton;
  }
  auto a = std::make_shared<Automaton>(g, vocab);
  if (entries_.size() >= capacity_) {
    entries_.erase(std::min_element(entries_.begin(), entries_.end(),
                                    [](const Entry& x, const Entry& y) { return x.used < y.used; }));
  }
  entries_.push_back(Entry{std::move(key), vocab.get(), a, uses_});
  return a;
}

}  // namespace nexus::grammar
