#include "grammar/matcher.h"

#include <algorithm>

#include "util/error.h"

namespace nexus::grammar {
namespace {

constexpr size_t kCacheEntries = 64;

inline uint64_t make_pos(uint32_t rule, uint32_t alt, uint32_t idx) {
  return (static_cast<uint64_t>(rule) << 32) | (static_cast<uint64_t>(alt) << 16) | idx;
}
inline uint32_t rule_of(uint64_t p) { return static_cast<uint32_t>(p >> 32); }
inline uint32_t alt_of(uint64_t p) { return static_cast<uint32_t>((p >> 16) & 0xFFFF); }
inline uint32_t idx_of(uint64_t p) { return static_cast<uint32_t>(p & 0xFFFF); }

}  // namespace

size_t Matcher::KeyHash::operator()(const std::vector<int32_t>& v) const {
  size_t h = v.size();
  for (int32_t x : v) h ^= static_cast<size_t>(x) * 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

Matcher::Matcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)) {
  for (const Rule& r : g_->rules) {
    if (r.alternatives.size() > 0xFFFF) throw Error("grammar: rule '" + r.name + "' has too many alternatives");
    for (const Sequence& s : r.alternatives)
      if (s.size() >= 0xFFFF) throw Error("grammar: rule '" + r.name + "' is too long");
  }
  frames_.push_back(Frame{~Pos{0}, kBottom});  // kBottom
  expanded_.emplace_back(1, kBottom);
  expanded_done_.push_back(1);
  std::vector<int32_t> start;
  for (uint32_t a = 0; a < g_->rules[g_->root].alternatives.size(); ++a) {
    const auto& e = expand(frame(make_pos(g_->root, a, 0), kBottom));
    start.insert(start.end(), e.begin(), e.end());
  }
  current_ = state(std::move(start));
}

int32_t Matcher::frame(Pos p, int32_t parent) {
  auto& by_parent = frame_ids_[p];
  auto [it, fresh] = by_parent.try_emplace(parent, static_cast<int32_t>(frames_.size()));
  if (fresh) {
    frames_.push_back(Frame{p, parent});
    expanded_.emplace_back();
    expanded_done_.push_back(0);
  }
  return it->second;
}

const ByteSet& Matcher::set_at(Pos p) const {
  return g_->sets[g_->rules[rule_of(p)].alternatives[alt_of(p)][idx_of(p)].index];
}

// The stacks with a byte-class top (or the empty stack) that frame f stands
// for: ends of alternatives return to the parent, rule references open each
// alternative (a reference last in its sequence is a tail call: the new
// frame sits directly on the parent). Left recursion was refused by check().
const std::vector<int32_t>& Matcher::expand(int32_t f) {
  if (expanded_done_[static_cast<size_t>(f)]) return expanded_[static_cast<size_t>(f)];
  std::vector<int32_t> out;
  const Frame fr = frames_[static_cast<size_t>(f)];
  const Sequence& seq = g_->rules[rule_of(fr.pos)].alternatives[alt_of(fr.pos)];
  const uint32_t i = idx_of(fr.pos);
  if (i == seq.size()) {
    out = expand(fr.parent);
  } else if (seq[i].kind == Element::Bytes) {
    out.push_back(f);
  } else {
    const int32_t cont = i + 1 < seq.size() ? frame(fr.pos + 1, fr.parent) : fr.parent;
    const uint32_t r = seq[i].index;
    for (uint32_t a = 0; a < g_->rules[r].alternatives.size(); ++a) {
      const int32_t child = frame(make_pos(r, a, 0), cont);
      const std::vector<int32_t> e = expand(child);  // a copy: expand() may grow expanded_
      out.insert(out.end(), e.begin(), e.end());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  if (out.size() > kMaxStacks) throw Error("grammar: too ambiguous to follow (more than 4096 parse stacks)");
  expanded_done_[static_cast<size_t>(f)] = 1;
  expanded_[static_cast<size_t>(f)] = std::move(out);
  return expanded_[static_cast<size_t>(f)];
}

int32_t Matcher::state(std::vector<int32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty()) return kDead;
  if (stacks.size() > kMaxStacks) throw Error("grammar: too ambiguous to follow (more than 4096 parse stacks)");
  auto [it, fresh] = state_ids_.try_emplace(stacks, static_cast<int32_t>(states_.size()));
  if (fresh) {
    if (states_.size() >= kMaxStates) throw Error("grammar: the output visits too many grammar states");
    State st;
    for (int32_t f : stacks)
      if (f != kBottom) st.firsts |= set_at(frames_[static_cast<size_t>(f)].pos);
    st.stacks = std::move(stacks);
    states_.push_back(std::move(st));
    std::array<int32_t, 256> t;
    t.fill(kUnknown);
    trans_.push_back(t);
  }
  return it->second;
}

int32_t Matcher::next(int32_t s, uint8_t byte) {
  int32_t& t = trans_[static_cast<size_t>(s)][byte];
  if (t != kUnknown) return t;
  int32_t result = kDead;
  if (states_[static_cast<size_t>(s)].firsts.test(byte)) {
    std::vector<int32_t> to;
    const std::vector<int32_t> from = states_[static_cast<size_t>(s)].stacks;  // states_ may grow below
    for (int32_t f : from) {
      if (f == kBottom) continue;
      const Frame fr = frames_[static_cast<size_t>(f)];
      if (!set_at(fr.pos).test(byte)) continue;
      const std::vector<int32_t> e = expand(frame(fr.pos + 1, fr.parent));
      to.insert(to.end(), e.begin(), e.end());
    }
    result = state(std::move(to));
  }
  trans_[static_cast<size_t>(s)][byte] = result;  // (t may dangle: trans_ may have grown)
  return result;
}

bool Matcher::can_end() const {
  const auto& st = states_[static_cast<size_t>(current_)].stacks;
  return !st.empty() && st.front() == kBottom;
}

bool Matcher::done() const {
  const auto& st = states_[static_cast<size_t>(current_)].stacks;
  return st.size() == 1 && st.front() == kBottom;
}

bool Matcher::accept(std::string_view bytes) {
  int32_t s = current_;
  for (unsigned char c : bytes) {
    s = next(s, c);
    if (s == kDead) return false;
  }
  current_ = s;
  return true;
}

void Matcher::walk(uint32_t node, int32_t s, std::vector<uint64_t>& mask) {
  const VocabTrie::Node& n = vocab_->nodes()[node];
  for (uint32_t k = 0; k < n.n_children; ++k) {
    const VocabTrie::Edge& edge = vocab_->edges()[n.first_child + k];
    if (!states_[static_cast<size_t>(s)].firsts.test(edge.byte)) continue;
    const int32_t to = next(s, edge.byte);
    if (to == kDead) continue;
    const VocabTrie::Node& child = vocab_->nodes()[edge.node];
    for (uint32_t t = 0; t < child.n_tokens; ++t) {
      const int32_t id = vocab_->tokens()[child.first_token + t];
      mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    if (child.n_children > 0) walk(edge.node, to, mask);
  }
}

const std::vector<uint64_t>& Matcher::allowed_tokens() {
  for (auto it = masks_.begin(); it != masks_.end(); ++it) {
    if (it->first == current_) {
      masks_.splice(masks_.begin(), masks_, it);
      return masks_.front().second;
    }
  }
  std::vector<uint64_t> mask((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64, 0);
  walk(0, current_, mask);
  masks_.emplace_front(current_, std::move(mask));
  if (masks_.size() > kCacheEntries) masks_.pop_back();
  return masks_.front().second;
}

}  // namespace nexus::grammar
