// The vocabulary as a byte trie, for computing which tokens a grammar
// allows: a walk down the trie advances the grammar's state once per shared
// prefix instead of once per token (llama.cpp and XGrammar prune the same
// way). Built once per tokenizer; immutable but for the cache of loop
// indices (loop_index.h, behind a mutex), shared by every matcher, from any
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/loop_index.h"

namespace nexus::grammar {

class VocabTrie {
 public:
  // pieces[id]: the bytes token `id` stands for; an empty piece (control
  // tokens) is never allowed by a grammar.
  explicit VocabTrie(const std::vector<std::string>& pieces);

  struct Node {
    uint32_t first_child = 0, n_children = 0;  // into edges()
    uint32_t first_token = 0, n_tokens = 0;    // into tokens(): ids whose piece ends here
  };
  struct Edge {
    uint8_t byte;
    uint32_t node;
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0] is the root
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t n_vocab() const { return n_vocab_; }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

  // The LoopIndex of `loop`, built at the first call for that set and kept
  // (at most kMaxLoopIndexes sets: a grammar has few distinct loops; past
  // that, null, and the caller walks the whole trie).
  static constexpr size_t kMaxLoopIndexes = 64;
  std::shared_ptr<const LoopIndex> loop_index(const ByteSet& loop) const;
  size_t n_loop_indexes() const;  // kept so far

 private:
  std::vector<std::string> pieces_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
  int32_t n_vocab_;
  mutable std::mutex loops_mu_;
  mutable std::vector<std::pair<ByteSet, std::shared_ptr<const LoopIndex>>> loops_;  // guarded by loops_mu_
};

}  // namespace nexus::grammar
