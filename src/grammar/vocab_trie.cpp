#include "grammar/vocab_trie.h"

#include <algorithm>
#include <numeric>

namespace nexus::grammar {

VocabTrie::VocabTrie(const std::vector<std::string>& pieces)
    : pieces_(pieces), n_vocab_(static_cast<int32_t>(pieces.size())) {
  // Tokens sorted by piece: each node's subtree is a contiguous run, so the
  // trie is built in one pass with children in byte order.
  std::vector<int32_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::erase_if(order, [&](int32_t id) { return pieces[id].empty(); });
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces[a] < pieces[b]; });

  struct Build {
    std::vector<std::pair<uint8_t, uint32_t>> children;
    std::vector<int32_t> ids;
  };
  std::vector<Build> b(1);
  for (int32_t id : order) {
    uint32_t n = 0;
    for (unsigned char c : pieces[id]) {
      if (b[n].children.empty() || b[n].children.back().first != c) {
        const auto child = static_cast<uint32_t>(b.size());
        b.push_back({});  // may move b's elements: index b[n] again below
        b[n].children.emplace_back(c, child);
      }
      n = b[n].children.back().second;
    }
    b[n].ids.push_back(id);
  }
  nodes_.resize(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    Node& node = nodes_[i];
    node.first_child = static_cast<uint32_t>(edges_.size());
    node.n_children = static_cast<uint32_t>(b[i].children.size());
    for (const auto& [c, child] : b[i].children) edges_.push_back(Edge{c, child});
    node.first_token = static_cast<uint32_t>(tokens_.size());
    node.n_tokens = static_cast<uint32_t>(b[i].ids.size());
    tokens_.insert(tokens_.end(), b[i].ids.begin(), b[i].ids.end());
  }
}

std::shared_ptr<const LoopIndex> VocabTrie::loop_index(const ByteSet& loop) const {
  std::lock_guard lock(loops_mu_);
  for (const auto& [bytes, index] : loops_)
    if (bytes == loop) return index;
  if (loops_.size() >= kMaxLoopIndexes) return nullptr;
  auto index = std::make_shared<const LoopIndex>(build_loop_index(*this, loop));
  loops_.emplace_back(loop, index);
  return index;
}

size_t VocabTrie::n_loop_indexes() const {
  std::lock_guard lock(loops_mu_);
  return loops_.size();
}

}  // namespace nexus::grammar
