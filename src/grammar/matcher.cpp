#include "grammar/matcher.h"

#include <algorithm>
#include <functional>

#include "util/error.h"

namespace nexus::grammar {
namespace {

constexpr size_t kCacheEntries = 64;

inline Matcher::Pos pos(uint32_t rule, uint32_t alt, uint32_t idx) {
  return (static_cast<uint64_t>(rule) << 32) | (static_cast<uint64_t>(alt) << 16) | idx;
}
inline uint32_t rule_of(Matcher::Pos p) { return static_cast<uint32_t>(p >> 32); }
inline uint32_t alt_of(Matcher::Pos p) { return static_cast<uint32_t>((p >> 16) & 0xFFFF); }
inline uint32_t idx_of(Matcher::Pos p) { return static_cast<uint32_t>(p & 0xFFFF); }

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)) {
  for (const Rule& r : g_->rules) {
    if (r.alternatives.size() > 0xFFFF) throw Error("grammar: rule '" + r.name + "' has too many alternatives");
    for (const Sequence& s : r.alternatives)
      if (s.size() >= 0xFFFF) throw Error("grammar: rule '" + r.name + "' is too long");
  }
  for (uint32_t a = 0; a < g_->rules[g_->root].alternatives.size(); ++a) {
    Stack s{pos(g_->root, a, 0)};
    expand(s, stacks_);
  }
  dedupe(stacks_);
}

// s's top may be a rule reference or the end of an alternative: replaces it
// by stacks whose tops are byte classes (or the empty stack), into out.
void Matcher::expand(Stack& s, std::vector<Stack>& out) const {
  if (s.empty()) {
    out.push_back(s);
    return;
  }
  const Pos top = s.back();
  const Sequence& seq = g_->rules[rule_of(top)].alternatives[alt_of(top)];
  const uint32_t i = idx_of(top);
  if (i == seq.size()) {  // this alternative is complete: back to the parent
    s.pop_back();
    expand(s, out);
    s.push_back(top);
    return;
  }
  const Element& e = seq[i];
  if (e.kind == Element::Bytes) {
    out.push_back(s);
    if (out.size() > kMaxStacks) throw Error("grammar: too ambiguous to follow (more than 4096 parse stacks)");
    return;
  }
  // A rule reference: the continuation (unless it was the last element: a
  // tail call), then each alternative of the rule.
  s.pop_back();
  const bool cont = i + 1 < seq.size();
  if (cont) s.push_back(pos(rule_of(top), alt_of(top), i + 1));
  const Rule& r = g_->rules[e.index];
  for (uint32_t a = 0; a < r.alternatives.size(); ++a) {
    s.push_back(pos(e.index, a, 0));
    expand(s, out);
    s.pop_back();
  }
  if (cont) s.pop_back();
  s.push_back(top);
}

void Matcher::dedupe(std::vector<Stack>& v) {
  if (v.size() < 2) return;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

void Matcher::advance(const std::vector<Stack>& from, uint8_t byte, std::vector<Stack>& to) const {
  to.clear();
  for (const Stack& s : from) {
    if (s.empty()) continue;
    const Pos top = s.back();
    const Element& e = g_->rules[rule_of(top)].alternatives[alt_of(top)][idx_of(top)];
    if (!g_->sets[e.index].test(byte)) continue;
    Stack next = s;
    next.back() = top + 1;
    expand(next, to);
  }
  dedupe(to);
}

bool Matcher::can_end() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::done() const { return stacks_.size() == 1 && stacks_[0].empty(); }

bool Matcher::accept(std::string_view bytes) {
  std::vector<Stack> cur = stacks_, next;
  for (unsigned char c : bytes) {
    advance(cur, c, next);
    if (next.empty()) return false;
    cur.swap(next);
  }
  stacks_.swap(cur);
  current_ = nullptr;
  return true;
}

void Matcher::walk(uint32_t node, const std::vector<Stack>& stacks, size_t depth, std::vector<uint64_t>& mask) {
  if (scratch_.size() <= depth) scratch_.resize(depth + 1);
  const VocabTrie::Node& n = vocab_->nodes()[node];
  // Bytes any stack can take: children outside it are skipped unvisited.
  ByteSet firsts;
  for (const Stack& s : stacks) {
    if (s.empty()) continue;
    const Pos top = s.back();
    firsts |= g_->sets[g_->rules[rule_of(top)].alternatives[alt_of(top)][idx_of(top)].index];
  }
  for (uint32_t k = 0; k < n.n_children; ++k) {
    const VocabTrie::Edge& edge = vocab_->edges()[n.first_child + k];
    if (!firsts.test(edge.byte)) continue;
    std::vector<Stack>& next = scratch_[depth];
    advance(stacks, edge.byte, next);
    if (next.empty()) continue;
    const VocabTrie::Node& child = vocab_->nodes()[edge.node];
    for (uint32_t t = 0; t < child.n_tokens; ++t) {
      const int32_t id = vocab_->tokens()[child.first_token + t];
      mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    if (child.n_children > 0) {
      std::vector<Stack> keep = std::move(next);  // scratch_[depth] is reused by the recursion's siblings
      walk(edge.node, keep, depth + 1, mask);
      scratch_[depth] = std::move(keep);
    }
  }
}

const std::vector<uint64_t>& Matcher::allowed_tokens() {
  if (current_) return *current_;
  // The state's key: its stacks, each followed by a separator.
  std::vector<Pos> key;
  for (const Stack& s : stacks_) {
    key.insert(key.end(), s.begin(), s.end());
    key.push_back(~Pos{0});
  }
  size_t h = key.size();
  for (Pos p : key) h ^= std::hash<Pos>{}(p) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  auto& bucket = index_[h];
  for (auto it : bucket) {
    if (it->first == key) {
      lru_.splice(lru_.begin(), lru_, it);
      return *(current_ = &it->second);
    }
  }
  std::vector<uint64_t> mask((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64, 0);
  walk(0, stacks_, 0, mask);
  lru_.emplace_front(std::move(key), std::move(mask));
  bucket.push_back(lru_.begin());
  if (lru_.size() > kCacheEntries) {
    auto last = std::prev(lru_.end());
    for (auto& [hk, b] : index_) std::erase(b, last);
    std::erase_if(index_, [](const auto& kv) { return kv.second.empty(); });
    lru_.pop_back();
  }
  return *(current_ = &lru_.front().second);
}

}  // namespace nexus::grammar
