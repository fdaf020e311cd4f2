// Greedy pair merging over a word's UTF-8 characters, the core both the
// SentencePiece-style ("llama") and byte-level BPE ("gpt2") tokenizers share
// (as llama.cpp's llm_tokenizer_spm / llm_tokenizer_bpe do): repeatedly merge
// the adjacent pair with the highest priority until no pair qualifies.
// Internal to src/tokenizer.
#pragma once

#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace nexus::tok {

struct Symbol {
  int prev, next;   // linked list of live symbols (-1: none)
  size_t start, n;  // bytes of the text; n == 0 once merged into its left neighbour
};

// One symbol per UTF-8 character of `text`, linked in order.
inline std::vector<Symbol> split_chars(std::string_view text) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = utf8::decode(text, off).len;
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  return sym;
}

// priority(text of the merged pair) -> std::optional<double>: nullopt when
// the pair cannot merge; otherwise higher merges first (SPM: the token's
// score; BPE: minus the merge rank). Ties go to the leftmost pair.
template <class Priority>
void merge_symbols(std::string_view text, std::vector<Symbol>& sym, Priority priority) {
  struct Bigram {
    int left, right;
    double priority;
    size_t size;  // bytes of the merged text, to detect stale entries
  };
  auto order = [](const Bigram& a, const Bigram& b) {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(order)> queue(order);
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const size_t size = sym[l].n + sym[r].n;  // live neighbours are contiguous
    if (const std::optional<double> p = priority(text.substr(sym[l].start, size), sym[l].n))
      queue.push({l, r, *p, size});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& left = sym[bg.left];
    Symbol& right = sym[bg.right];
    // Stale: one side was merged away, or grew, since the pair was queued.
    if (left.n == 0 || right.n == 0 || left.n + right.n != bg.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = bg.left;
    try_add(left.prev, bg.left);
    try_add(bg.left, left.next);
  }
}

}  // namespace nexus::tok
