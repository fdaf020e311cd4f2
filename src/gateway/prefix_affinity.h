// Prefix affinity: which replica last served a prompt prefix.
//
// The gateway does not tokenize, so blocks of tokens (what a replica's prefix
// cache keys on, 16 tokens per block) are approximated by blocks of bytes of
// the rendered prompt: the prompt of /v1/completions (a string; token ids
// as their JSON text; of a batch, the first), or for
// /v1/chat/completions and /v1/messages each message as "role\n" + content
// + "\n" in order, after Anthropic's "system" (or the Responses API's
// "instructions") and, for /v1/responses, its input items the same way. An
// agent's own key (prompt_cache_key, or Anthropic's metadata.user_id) comes
// first as one whole block, so the requests of one agent session go to the
// replica that holds its KV even before their prompts share 64 bytes.
// The first kMaxPrefixBlocks blocks of kPrefixBlockBytes bytes each are
// hashed in a chain (FNV-1a 64 over the previous hash and the block), so
// hash i names the whole prefix up to block i, as the replica's block hashes
// do; a partial last block is not hashed. Lookup takes the longest prefix
// known. The table is bounded (kMaxEntries, least recently used evicted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace nexus::gateway {

inline constexpr size_t kPrefixBlockBytes = 64;
inline constexpr size_t kMaxPrefixBlocks = 64;  // 4 KiB of prompt

// The text the prefix hashes are taken over (see above); "" when the body
// has neither "prompt" nor "messages".
std::string prefix_text(const nlohmann::ordered_json& body);
// Chained hashes of the leading full blocks of `text` (at most kMaxPrefixBlocks).
std::vector<uint64_t> prefix_block_hashes(std::string_view text);

class PrefixAffinity {
 public:
  static constexpr size_t kMaxEntries = 1 << 16;
  struct Match {
    size_t replica;
    size_t blocks;  // how many leading blocks matched
  };
  // The replica that served the longest known prefix of `hashes`.
  std::optional<Match> lookup(const std::vector<uint64_t>& hashes);
  // Every prefix of `hashes` now maps to `replica`.
  void record(const std::vector<uint64_t>& hashes, size_t replica);
  // Block hashes in the table that map to `replica` (its share of the
  // prefixes, as far as the gateway knows).
  int64_t owned(size_t replica);

 private:
  struct Entry {
    size_t replica;
    std::list<uint64_t>::iterator lru;
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> map_;
  std::list<uint64_t> lru_;  // most recent first
  std::vector<int64_t> owned_;  // by replica
  void own(size_t replica, int64_t delta);  // under mu_
};

}  // namespace nexus::gateway
