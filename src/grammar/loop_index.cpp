#include "grammar/loop_index.h"

#include "grammar/vocab_trie.h"

namespace nexus::grammar {

LoopIndex build_loop_index(const VocabTrie& vocab, const ByteSet& loop) {
  LoopIndex out;
  out.inside.assign((static_cast<size_t>(vocab.n_vocab()) + 63) / 64, 0);
  std::vector<uint32_t> todo{0};  // nodes reached from the root by L bytes only
  while (!todo.empty()) {
    const VocabTrie::Node& n = vocab.nodes()[todo.back()];
    todo.pop_back();
    for (uint32_t k = 0; k < n.n_children; ++k) {
      const uint32_t e = n.first_child + k;
      const VocabTrie::Edge& edge = vocab.edges()[e];
      if (!loop.test(edge.byte)) {
        out.exits.push_back(e);
        continue;
      }
      const VocabTrie::Node& child = vocab.nodes()[edge.node];
      for (uint32_t t = 0; t < child.n_tokens; ++t) {
        const int32_t id = vocab.tokens()[child.first_token + t];
        out.inside[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      }
      if (child.n_children > 0) todo.push_back(edge.node);
    }
  }
  return out;
}

ByteSet json_string_loop_bytes() {
  ByteSet s;
  for (int c = 0x20; c < 0x80; ++c)
    if (c != '"' && c != '\\') s.set(static_cast<size_t>(c));
  return s;
}

}  // namespace nexus::grammar
