#include "engine/block_manager.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace nexus {
namespace {

constexpr uint64_t kRootHash = 0x6e657875735f6b76ull;  // the empty prefix

// splitmix64's finaliser: a bijective mix with good avalanche.
uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Hash of a block of tokens chained with the hash of everything before it.
uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  uint64_t h = mix64(parent + 0x9e3779b97f4a7c15ull);
  for (int32_t i = 0; i < n; ++i) h = mix64(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

int32_t checked_blocks(int32_t n_blocks, int32_t block_size) {
  if (n_blocks < 1) throw Error("block manager: needs at least one block, got " + std::to_string(n_blocks));
  if (block_size < 1) throw Error("block manager: block size must be positive, got " + std::to_string(block_size));
  return n_blocks;
}

int32_t checked_window(int32_t n_swa_blocks, int32_t window) {
  if (n_swa_blocks < 0 || window < 0 || (n_swa_blocks > 0) != (window > 0))
    throw Error("block manager: a window pool needs both a window and blocks, got window " + std::to_string(window) +
                " and " + std::to_string(n_swa_blocks) + " blocks");
  return n_swa_blocks;
}

}  // namespace

BlockManager::BlockManager(int32_t n_blocks, int32_t block_size, int32_t n_swa_blocks, int32_t window)
    : block_size_(block_size),
      window_(window),
      global_(checked_blocks(n_blocks, block_size), block_size),
      swa_(checked_window(n_swa_blocks, window), block_size) {}

BlockManager::Seq& BlockManager::get(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error("block manager: unknown sequence " + std::to_string(seq));
  return it->second;
}

const BlockManager::Seq& BlockManager::get(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error("block manager: unknown sequence " + std::to_string(seq));
  return it->second;
}

int32_t BlockManager::swa_first_needed(int64_t pos) const {
  return static_cast<int32_t>(std::max<int64_t>(0, pos - window_ + 1) / block_size_);
}

void BlockManager::note_swa_held(const Seq& s) {
  const int32_t held = static_cast<int32_t>(s.swa_table.size()) - s.swa_first;
  stats_.swa_blocks_per_seq_max = std::max(stats_.swa_blocks_per_seq_max, held);
}

BlockManager::SeqId BlockManager::create() {
  const SeqId id = next_id_++;
  seqs_[id].last_hash = kRootHash;
  return id;
}

void BlockManager::release(SeqId seq) {
  Seq& s = get(seq);
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) global_.unref(*it);
  for (auto it = s.swa_table.rbegin(); it != s.swa_table.rend(); ++it)
    if (*it != kNoBlock) swa_.unref(*it);
  seqs_.erase(seq);
}

int32_t BlockManager::match_prefix(SeqId seq, std::span<const int32_t> tokens) {
  Seq& s = get(seq);
  if (!s.tokens.empty()) throw Error("block manager: match_prefix on a sequence that already has tokens");
  stats_.queried_tokens += static_cast<int64_t>(tokens.size());
  if (tokens.empty()) return 0;
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(block_size_);
  std::vector<uint64_t> chain{kRootHash};  // chain[i]: hash of the first i blocks
  std::vector<int32_t> hits;
  for (size_t i = 0; i < max_blocks; ++i) {
    const int32_t* t = tokens.data() + i * block_size_;
    const uint64_t h = chain_hash(chain.back(), t, block_size_);
    const int32_t b = global_.find(h, chain.back(), t);
    if (b < 0) break;
    hits.push_back(b);
    chain.push_back(h);
  }
  // With a window pool, the longest of those prefixes whose next query finds
  // the windowed blocks it reads still cached.
  size_t n = hits.size();
  std::vector<int32_t> swa_hits;
  for (; has_window_pool() && n > 0; --n) {
    swa_hits.assign(static_cast<size_t>(swa_first_needed(static_cast<int64_t>(n) * block_size_)), kNoBlock);
    for (size_t i = swa_hits.size(); i < n; ++i) {
      const int32_t b = swa_.find(chain[i + 1], chain[i], tokens.data() + i * block_size_);
      if (b < 0) break;
      swa_hits.push_back(b);
    }
    if (swa_hits.size() == n) break;
  }
  if (n == 0) swa_hits.clear();
  for (size_t i = 0; i < n; ++i) {
    global_.ref(hits[i]);
    s.table.push_back(hits[i]);
  }
  if (has_window_pool()) {
    s.swa_first = swa_first_needed(static_cast<int64_t>(n) * block_size_);
    for (int32_t b : swa_hits)
      if (b != kNoBlock) swa_.ref(b);
    s.swa_table = std::move(swa_hits);
    note_swa_held(s);
  }
  const int32_t matched = static_cast<int32_t>(n) * block_size_;
  s.tokens.assign(tokens.begin(), tokens.begin() + matched);
  s.n_hashed = static_cast<int32_t>(n);
  s.last_hash = chain[n];
  stats_.hit_tokens += matched;
  return matched;
}

int32_t BlockManager::blocks_needed(SeqId seq, int32_t n) const {
  const Seq& s = get(seq);
  if (n < 0) throw Error("block manager: negative token count");
  const int64_t end = static_cast<int64_t>(s.tokens.size()) + n;
  const int64_t need = (end + block_size_ - 1) / block_size_ - static_cast<int64_t>(s.table.size());
  return static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(need, 0), INT32_MAX));
}

bool BlockManager::can_append(SeqId seq, int32_t n, int32_t n_now) const {
  if (blocks_needed(seq, n) > global_.n_available()) return false;
  return !has_window_pool() || blocks_needed(seq, n_now < 0 ? n : std::min(n, n_now)) <= swa_.n_available();
}

bool BlockManager::append(SeqId seq, std::span<const int32_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) return false;
  const int32_t need = blocks_needed(seq, static_cast<int32_t>(tokens.size()));
  if (need > global_.n_available() || (has_window_pool() && need > swa_.n_available())) return false;
  Seq& s = get(seq);
  for (int32_t i = 0; i < need; ++i) s.table.push_back(global_.allocate());
  if (has_window_pool()) {
    for (int32_t i = 0; i < need; ++i) s.swa_table.push_back(swa_.allocate());
    note_swa_held(s);
  }
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  return true;
}

void BlockManager::commit(SeqId seq) {
  Seq& s = get(seq);
  const int32_t n_full = static_cast<int32_t>(s.tokens.size() / static_cast<size_t>(block_size_));
  for (; s.n_hashed < n_full; ++s.n_hashed) {
    const size_t i = static_cast<size_t>(s.n_hashed);
    const int32_t* t = s.tokens.data() + i * block_size_;
    const uint64_t h = chain_hash(s.last_hash, t, block_size_);
    global_.publish(s.table[i], h, s.last_hash, t);
    if (has_window_pool() && s.swa_table[i] != kNoBlock) swa_.publish(s.swa_table[i], h, s.last_hash, t);
    s.last_hash = h;
  }
  if (!has_window_pool()) return;
  // Every later query is at position >= n_tokens: blocks wholly before its
  // window are read by no one (oldest first, so the LRU evicts them first).
  const int32_t dead = std::min(swa_first_needed(static_cast<int64_t>(s.tokens.size())),
                                static_cast<int32_t>(s.swa_table.size()));
  for (; s.swa_first < dead; ++s.swa_first) {
    swa_.unref(s.swa_table[static_cast<size_t>(s.swa_first)]);
    s.swa_table[static_cast<size_t>(s.swa_first)] = kNoBlock;
  }
}

int32_t BlockManager::truncate(SeqId seq, int32_t n) {
  Seq& s = get(seq);
  n = std::clamp<int32_t>(n, 0, static_cast<int32_t>(s.tokens.size()));
  int32_t keep = (n + block_size_ - 1) / block_size_;
  // A hashed block may be shared: never written again. The two pools hash
  // independently (a duplicate in one may be the first in the other).
  if (n % block_size_ != 0) {
    const size_t last = static_cast<size_t>(keep - 1);
    const bool shared = global_.hashed(s.table[last]) ||
                        (has_window_pool() && s.swa_table[last] != kNoBlock && swa_.hashed(s.swa_table[last]));
    if (shared) n = --keep * block_size_;
  }
  // A query at n reads windowed blocks from swa_first_needed(n) on: given back, the rest is useless.
  if (has_window_pool() && swa_first_needed(n) < s.swa_first) n = keep = 0;
  while (static_cast<int32_t>(s.table.size()) > keep) {
    global_.unref(s.table.back());
    s.table.pop_back();
  }
  while (static_cast<int32_t>(s.swa_table.size()) > keep) {
    if (s.swa_table.back() != kNoBlock) swa_.unref(s.swa_table.back());
    s.swa_table.pop_back();
  }
  s.swa_first = std::min(s.swa_first, keep);
  s.tokens.resize(static_cast<size_t>(n));
  if (s.n_hashed > n / block_size_) {  // recompute the chain hash of the blocks kept
    s.n_hashed = n / block_size_;
    s.last_hash = kRootHash;
    for (int32_t i = 0; i < s.n_hashed; ++i)
      s.last_hash = chain_hash(s.last_hash, s.tokens.data() + static_cast<size_t>(i) * block_size_, block_size_);
  }
  return n;
}

std::span<const int32_t> BlockManager::block_table(SeqId seq) const { return get(seq).table; }
std::span<const int32_t> BlockManager::swa_block_table(SeqId seq) const { return get(seq).swa_table; }
int32_t BlockManager::n_swa_held(SeqId seq) const {
  const Seq& s = get(seq);
  return static_cast<int32_t>(s.swa_table.size()) - s.swa_first;
}
int32_t BlockManager::n_tokens(SeqId seq) const { return static_cast<int32_t>(get(seq).tokens.size()); }
std::span<const int32_t> BlockManager::tokens(SeqId seq) const { return get(seq).tokens; }

BlockManager::Stats BlockManager::stats() const {
  Stats s = stats_;
  s.evictions = global_.evictions();
  s.swa_evictions = swa_.evictions();
  return s;
}

void BlockManager::validate() const {
  auto fail = [](const std::string& what) { throw Error("block manager invariant: " + what); };
  std::vector<int32_t> refs(static_cast<size_t>(global_.n_blocks()), 0), swa_refs(static_cast<size_t>(swa_.n_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    const std::string which = "sequence " + std::to_string(id);
    if (s.table.size() != (s.tokens.size() + block_size_ - 1) / block_size_)
      fail(which + " has " + std::to_string(s.table.size()) + " blocks for " + std::to_string(s.tokens.size()) +
           " tokens");
    for (int32_t b : s.table) ++refs.at(static_cast<size_t>(b));
    if (!has_window_pool()) {
      if (!s.swa_table.empty()) fail(which + " has a windowed table without a window pool");
      continue;
    }
    if (s.swa_table.size() != s.table.size()) fail(which + "'s windowed table is not in step with its global one");
    if (s.swa_first > swa_first_needed(static_cast<int64_t>(s.tokens.size())))
      fail(which + " gave back windowed blocks its next query reads");
    for (size_t i = 0; i < s.swa_table.size(); ++i) {
      const bool given_back = static_cast<int32_t>(i) < s.swa_first;
      if (given_back != (s.swa_table[i] == kNoBlock)) fail(which + "'s windowed entry " + std::to_string(i));
      if (!given_back) ++swa_refs.at(static_cast<size_t>(s.swa_table[i]));
    }
  }
  global_.validate(refs, "global pool");
  swa_.validate(swa_refs, "windowed pool");
}

}  // namespace nexus
