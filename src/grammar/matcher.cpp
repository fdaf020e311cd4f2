#include "grammar/matcher.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

#include "grammar/automaton_cache.h"
#include "util/error.h"

namespace nexus::grammar {
namespace {

// A state looping on fewer bytes is walked whole (its loop index would save
// little, and every distinct set takes a slot of the trie's cache).
constexpr size_t kMinLoopBytes = 8;

inline uint64_t make_pos(uint32_t rule, uint32_t alt, uint32_t idx) {
  return (static_cast<uint64_t>(rule) << 32) | (static_cast<uint64_t>(alt) << 16) | idx;
}
inline uint32_t rule_of(uint64_t p) { return static_cast<uint32_t>(p >> 32); }
inline uint32_t alt_of(uint64_t p) { return static_cast<uint32_t>((p >> 16) & 0xFFFF); }
inline uint32_t idx_of(uint64_t p) { return static_cast<uint32_t>(p & 0xFFFF); }

GrammarLimit too_many_stacks() {
  return GrammarLimit(fmt::format("grammar: too ambiguous to follow (more than {} parse stacks)", kMaxStacks));
}

}  // namespace

size_t Automaton::KeyHash::operator()(const std::vector<int32_t>& v) const {
  size_t h = v.size();
  for (int32_t x : v) h ^= static_cast<size_t>(x) * 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

Automaton::Automaton(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)) {
  for (const Rule& r : g_->rules) {
    if (r.alternatives.size() > 0xFFFF) throw GrammarLimit("grammar: rule '" + r.name + "' has too many alternatives");
    for (const Sequence& s : r.alternatives)
      if (s.size() >= 0xFFFF) throw GrammarLimit("grammar: rule '" + r.name + "' is too long");
  }
  frames_.push_back(Frame{~Pos{0}, kBottom});  // kBottom
  expanded_.emplace_back(1, kBottom);
  expanded_done_.push_back(1);
  std::vector<int32_t> start;
  for (uint32_t a = 0; a < g_->rules[g_->root].alternatives.size(); ++a) {
    const auto& e = expand(frame(make_pos(g_->root, a, 0), kBottom));
    start.insert(start.end(), e.begin(), e.end());
  }
  start_ = state(std::move(start));
}

size_t Automaton::n_states() const {
  std::lock_guard lock(mu_);
  return states_.size();
}

bool Automaton::can_end(int32_t s) const {
  const auto& st = states_[static_cast<size_t>(s)].stacks;
  return !st.empty() && st.front() == kBottom;
}

bool Automaton::done(int32_t s) const {
  const auto& st = states_[static_cast<size_t>(s)].stacks;
  return st.size() == 1 && st.front() == kBottom;
}

void Automaton::mask(int32_t s, std::vector<uint64_t>& out) {
  if (auto it = masks_.find(s); it != masks_.end()) {
    it->second.to_bits(out);
    return;
  }
  out = compute_mask(s);
  TokenSet kept(out, vocab_->n_vocab());
  if (mask_bytes_ + kept.bytes() > kMaskCacheBytes) {
    masks_.clear();
    mask_bytes_ = 0;
  }
  mask_bytes_ += kept.bytes();
  masks_.emplace(s, std::move(kept));
}

Matcher::Matcher(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabTrie> vocab)
    : Matcher(std::make_shared<Automaton>(std::move(g), std::move(vocab))) {}

Matcher::Matcher(std::shared_ptr<Automaton> shared) : a_(std::move(shared)), current_(a_->start_) {}

int32_t Automaton::frame(Pos p, int32_t parent) {
  auto& by_parent = frame_ids_[p];
  auto [it, fresh] = by_parent.try_emplace(parent, static_cast<int32_t>(frames_.size()));
  if (fresh) {
    frames_.push_back(Frame{p, parent});
    expanded_.emplace_back();
    expanded_done_.push_back(0);
  }
  return it->second;
}

const ByteSet& Automaton::set_at(Pos p) const {
  return g_->sets[g_->rules[rule_of(p)].alternatives[alt_of(p)][idx_of(p)].index];
}

// The stacks with a byte-class top (or the empty stack) that frame f stands
// for: ends of alternatives return to the parent, rule references open each
// alternative (a reference last in its sequence is a tail call: the new
// frame sits directly on the parent). Left recursion was refused by check().
const std::vector<int32_t>& Automaton::expand(int32_t f) {
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
  if (out.size() > kMaxStacks) throw too_many_stacks();
  expanded_done_[static_cast<size_t>(f)] = 1;
  expanded_[static_cast<size_t>(f)] = std::move(out);
  return expanded_[static_cast<size_t>(f)];
}

int32_t Automaton::state(std::vector<int32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty()) return kDead;
  if (stacks.size() > kMaxStacks) throw too_many_stacks();
  if (auto found = state_ids_.find(stacks); found != state_ids_.end()) return found->second;
  if (states_.size() >= kMaxStates)
    throw GrammarLimit(fmt::format("grammar: the output visits more than {} grammar states", kMaxStates));
  auto [it, fresh] = state_ids_.try_emplace(stacks, static_cast<int32_t>(states_.size()));
  if (fresh) {
    State st;
    for (int32_t f : stacks)
      if (f != kBottom) st.firsts |= set_at(frames_[static_cast<size_t>(f)].pos);
    st.stacks = std::move(stacks);
    states_.push_back(std::move(st));
    std::array<int32_t, 256> t;
    t.fill(kUnknown);
    trans_.push_back(t);
    row_done_.push_back(0);
  }
  return it->second;
}

int32_t Automaton::next(int32_t s, uint8_t byte) {
  if (!row_done_[static_cast<size_t>(s)]) fill_row(s);
  const int32_t t = trans_[static_cast<size_t>(s)][byte];
  return t != kUnknown ? t : step(s, byte);
}

// One transition, computed on its own (and kept); throws what state() throws.
int32_t Automaton::step(int32_t s, uint8_t byte) {
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
  trans_[static_cast<size_t>(s)][byte] = result;
  return result;
}

// Every transition of s at once: bytes taken by the same stacks of s lead to
// the same state, so each group of bytes costs one subset construction (a
// string state's ~200 bytes are one group). A transition whose state cannot
// be made (too many stacks or states) stays unknown, so that step() throws
// only if that byte really comes, as it would have without this.
void Automaton::fill_row(int32_t s) {
  row_done_[static_cast<size_t>(s)] = 1;
  const std::vector<int32_t> from = states_[static_cast<size_t>(s)].stacks;  // states_ may grow below
  const ByteSet firsts = states_[static_cast<size_t>(s)].firsts;
  std::vector<const ByteSet*> sets(from.size(), nullptr);
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != kBottom) sets[i] = &set_at(frames_[static_cast<size_t>(from[i])].pos);
  std::vector<std::pair<std::vector<uint32_t>, int32_t>> groups;  // stacks taking a byte -> its state
  std::vector<uint32_t> takers;
  for (int b = 0; b < 256; ++b) {
    int32_t& t = trans_[static_cast<size_t>(s)][static_cast<size_t>(b)];
    if (t != kUnknown) continue;
    if (!firsts.test(static_cast<size_t>(b))) {
      t = kDead;
      continue;
    }
    takers.clear();
    for (uint32_t i = 0; i < sets.size(); ++i)
      if (sets[i] && sets[i]->test(static_cast<size_t>(b))) takers.push_back(i);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == takers; });
    if (g != groups.end()) {
      trans_[static_cast<size_t>(s)][static_cast<size_t>(b)] = g->second;
      continue;
    }
    int32_t result = kUnknown;
    try {
      std::vector<int32_t> to;
      for (uint32_t i : takers) {
        const Frame fr = frames_[static_cast<size_t>(from[i])];
        const std::vector<int32_t> e = expand(frame(fr.pos + 1, fr.parent));  // a copy: expanded_ may grow
        to.insert(to.end(), e.begin(), e.end());
      }
      result = state(std::move(to));
    } catch (const Error&) {
      // Left unknown: step() computes it again, and throws, if the byte comes.
    }
    trans_[static_cast<size_t>(s)][static_cast<size_t>(b)] = result;  // (trans_ may have grown: index again)
    groups.emplace_back(takers, result);
  }
}

void check_followable(std::shared_ptr<const Grammar> g) {
  // Grammars that passed, by a hash of their content: a client's schema or
  // the json_object grammar comes back request after request, and the walk
  // costs 1.4-1.6 ms for either (a -O3 build). A hash collision only skips
  // the early check: the matcher still throws GrammarLimit if the bound is met.
  static std::mutex passed_mu;
  static std::unordered_set<size_t> passed;
  const size_t key = std::hash<std::string>{}(grammar_key(*g));
  {
    std::lock_guard lock(passed_mu);
    if (passed.count(key)) return;
  }
  check_walk(std::move(g));
  std::lock_guard lock(passed_mu);
  if (passed.size() >= kCheckCacheEntries) passed.clear();
  passed.insert(key);
}

void check_walk(std::shared_ptr<const Grammar> g) {
  Automaton a(std::move(g), nullptr);  // the start state (no vocabulary: no masks are made)
  const Grammar& gr = a.grammar();
  size_t expanded = 0;
  for (uint32_t r = 0; r < gr.rules.size() && expanded < kCheckExpansions; ++r)
    for (uint32_t alt = 0; alt < gr.rules[r].alternatives.size() && expanded < kCheckExpansions; ++alt)
      for (uint32_t i = 0; i < gr.rules[r].alternatives[alt].size(); ++i)
        if (gr.rules[r].alternatives[alt][i].kind == Element::Rule)
          expanded += a.expand(a.frame(make_pos(r, alt, i), Automaton::kBottom)).size();
  // Breadth-first: states_ grows behind s as transitions are made.
  for (size_t s = 0; s < a.states_.size() && s < kCheckStates; ++s) {
    const auto id = static_cast<int32_t>(s);
    a.fill_row(id);
    for (int b = 0; b < 256; ++b)  // fill_row leaves unknown what would throw: step() throws it
      if (a.trans_[s][static_cast<size_t>(b)] == Automaton::kUnknown) a.step(id, static_cast<uint8_t>(b));
  }
}

bool Matcher::can_end() const {
  std::lock_guard lock(a_->mu_);
  return a_->can_end(current_);
}

bool Matcher::done() const {
  std::lock_guard lock(a_->mu_);
  return a_->done(current_);
}

bool Matcher::accept(std::string_view bytes) {
  std::lock_guard lock(a_->mu_);
  int32_t s = current_;
  for (unsigned char c : bytes) {
    s = a_->next(s, c);
    if (s == Automaton::kDead) return false;
  }
  current_ = s;
  return true;
}

bool Matcher::allows(std::string_view bytes) {
  std::lock_guard lock(a_->mu_);
  int32_t s = current_;
  for (unsigned char c : bytes) {
    s = a_->next(s, c);
    if (s == Automaton::kDead) return false;
  }
  return true;
}

void Automaton::walk(uint32_t node, int32_t s, std::vector<uint64_t>& mask) {
  const VocabTrie::Node& n = vocab_->nodes()[node];
  for (uint32_t k = 0; k < n.n_children; ++k) take_edge(n.first_child + k, s, mask);
}

// The tokens below trie edge e (its node's and its subtree's) that state s
// allows.
void Automaton::take_edge(uint32_t e, int32_t s, std::vector<uint64_t>& mask) {
  const VocabTrie::Edge& edge = vocab_->edges()[e];
  if (!states_[static_cast<size_t>(s)].firsts.test(edge.byte)) return;
  const int32_t to = next(s, edge.byte);
  if (to == kDead) return;
  const VocabTrie::Node& child = vocab_->nodes()[edge.node];
  for (uint32_t t = 0; t < child.n_tokens; ++t) {
    const int32_t id = vocab_->tokens()[child.first_token + t];
    mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  if (child.n_children > 0) walk(edge.node, to, mask);
}

// The mask of state s, computed (not cached). Where s loops on enough bytes
// (inside a string), the tokens made of those bytes come from the loop
// index and only its exits are walked; elsewhere the whole trie is walked
// (pruned by the bytes s takes).
std::vector<uint64_t> Automaton::compute_mask(int32_t s) {
  if (!row_done_[static_cast<size_t>(s)]) fill_row(s);
  ByteSet loop;
  for (int b = 0; b < 256; ++b)
    if (trans_[static_cast<size_t>(s)][static_cast<size_t>(b)] == s) loop.set(static_cast<size_t>(b));
  if (loop.count() >= kMinLoopBytes) {
    if (const std::shared_ptr<const LoopIndex> index = vocab_->loop_index(loop)) {
      std::vector<uint64_t> mask = index->inside;
      for (uint32_t e : index->exits) take_edge(e, s, mask);
      return mask;
    }
  }
  std::vector<uint64_t> mask((static_cast<size_t>(vocab_->n_vocab()) + 63) / 64, 0);
  walk(0, s, mask);
  return mask;
}

const std::vector<uint64_t>& Matcher::allowed_tokens() {
  std::lock_guard lock(a_->mu_);
  a_->mask(current_, mask_);
  return mask_;
}

}  // namespace nexus::grammar
