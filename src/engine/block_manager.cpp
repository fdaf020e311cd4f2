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

}  // namespace

BlockManager::BlockManager(int32_t n_blocks, int32_t block_size) : block_size_(block_size) {
  if (n_blocks < 1) throw Error("block manager: needs at least one block, got " + std::to_string(n_blocks));
  if (block_size < 1) throw Error("block manager: block size must be positive, got " + std::to_string(block_size));
  blocks_.resize(static_cast<size_t>(n_blocks));
  block_tokens_.resize(static_cast<size_t>(n_blocks) * block_size);
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is handed out first
}

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

BlockManager::SeqId BlockManager::create() {
  const SeqId id = next_id_++;
  seqs_[id].last_hash = kRootHash;
  return id;
}

void BlockManager::release(SeqId seq) {
  Seq& s = get(seq);
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) unref(*it);
  seqs_.erase(seq);
}

int32_t BlockManager::match_prefix(SeqId seq, std::span<const int32_t> tokens) {
  Seq& s = get(seq);
  if (!s.tokens.empty()) throw Error("block manager: match_prefix on a sequence that already has tokens");
  stats_.queried_tokens += static_cast<int64_t>(tokens.size());
  if (tokens.empty()) return 0;
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(block_size_);
  uint64_t parent = kRootHash;
  for (size_t i = 0; i < max_blocks; ++i) {
    const int32_t* t = tokens.data() + i * block_size_;
    const uint64_t h = chain_hash(parent, t, block_size_);
    auto hit = cache_.find(h);
    if (hit == cache_.end()) break;
    const int32_t b = hit->second;
    if (blocks_[b].parent != parent || !same_tokens(b, t)) break;  // a hash collision
    if (blocks_[b].ref++ == 0) lru_remove(b);
    s.table.push_back(b);
    parent = h;
  }
  const int32_t matched = static_cast<int32_t>(s.table.size()) * block_size_;
  s.tokens.assign(tokens.begin(), tokens.begin() + matched);
  s.n_hashed = static_cast<int32_t>(s.table.size());
  s.last_hash = parent;
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

bool BlockManager::append(SeqId seq, std::span<const int32_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) return false;
  const int32_t need = blocks_needed(seq, static_cast<int32_t>(tokens.size()));
  if (need > n_available()) return false;
  Seq& s = get(seq);
  for (int32_t i = 0; i < need; ++i) s.table.push_back(allocate());
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  return true;
}

void BlockManager::commit(SeqId seq) {
  Seq& s = get(seq);
  const int32_t n_full = static_cast<int32_t>(s.tokens.size() / static_cast<size_t>(block_size_));
  for (; s.n_hashed < n_full; ++s.n_hashed) {
    const int32_t* t = s.tokens.data() + static_cast<size_t>(s.n_hashed) * block_size_;
    const uint64_t h = chain_hash(s.last_hash, t, block_size_);
    const int32_t b = s.table[static_cast<size_t>(s.n_hashed)];
    // The first block computed for a prefix is the one others find; a
    // duplicate computed concurrently stays private and is freed with its
    // sequence.
    if (!blocks_[b].hashed && cache_.emplace(h, b).second) {
      blocks_[b].hashed = true;
      blocks_[b].hash = h;
      blocks_[b].parent = s.last_hash;
      std::copy(t, t + block_size_, block_tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
    }
    s.last_hash = h;
  }
}

int32_t BlockManager::truncate(SeqId seq, int32_t n) {
  Seq& s = get(seq);
  n = std::clamp<int32_t>(n, 0, static_cast<int32_t>(s.tokens.size()));
  int32_t keep = (n + block_size_ - 1) / block_size_;
  if (n % block_size_ != 0 && blocks_[s.table[static_cast<size_t>(keep - 1)]].hashed) n = --keep * block_size_;
  while (static_cast<int32_t>(s.table.size()) > keep) {
    unref(s.table.back());
    s.table.pop_back();
  }
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
int32_t BlockManager::n_tokens(SeqId seq) const { return static_cast<int32_t>(get(seq).tokens.size()); }
std::span<const int32_t> BlockManager::tokens(SeqId seq) const { return get(seq).tokens; }

int32_t BlockManager::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = lru_head_;  // evict the least recently released cached block
    lru_remove(b);
    cache_.erase(blocks_[b].hash);
    blocks_[b].hashed = false;
    ++stats_.evictions;
  }
  blocks_[b].ref = 1;
  return b;
}

void BlockManager::unref(int32_t b) {
  if (--blocks_[b].ref > 0) return;
  if (blocks_[b].hashed) lru_push(b);
  else free_.push_back(b);
}

void BlockManager::lru_push(int32_t b) {
  blocks_[b].lru_prev = lru_tail_;
  blocks_[b].lru_next = -1;
  if (lru_tail_ >= 0) blocks_[lru_tail_].lru_next = b;
  else lru_head_ = b;
  lru_tail_ = b;
  ++n_lru_;
}

void BlockManager::lru_remove(int32_t b) {
  Block& k = blocks_[b];
  if (k.lru_prev >= 0) blocks_[k.lru_prev].lru_next = k.lru_next;
  else lru_head_ = k.lru_next;
  if (k.lru_next >= 0) blocks_[k.lru_next].lru_prev = k.lru_prev;
  else lru_tail_ = k.lru_prev;
  k.lru_prev = k.lru_next = -1;
  --n_lru_;
}

bool BlockManager::same_tokens(int32_t b, const int32_t* tokens) const {
  return std::equal(tokens, tokens + block_size_, block_tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
}

void BlockManager::validate() const {
  auto fail = [](const std::string& what) { throw Error("block manager invariant: " + what); };
  const size_t n = blocks_.size();
  std::vector<int32_t> refs(n, 0), where(n, 0);  // where: 1 free, 2 cached
  for (const auto& [id, s] : seqs_) {
    if (s.table.size() != (s.tokens.size() + block_size_ - 1) / block_size_)
      fail("sequence " + std::to_string(id) + " has " + std::to_string(s.table.size()) + " blocks for " +
           std::to_string(s.tokens.size()) + " tokens");
    for (int32_t b : s.table) ++refs.at(static_cast<size_t>(b));
  }
  for (int32_t b : free_) {
    if (where.at(static_cast<size_t>(b))++) fail("block " + std::to_string(b) + " listed twice");
    if (blocks_[b].ref || blocks_[b].hashed) fail("free block " + std::to_string(b) + " in use or hashed");
  }
  int32_t count = 0;
  for (int32_t b = lru_head_, prev = -1; b >= 0; prev = b, b = blocks_[b].lru_next) {
    if (++count > n_lru_ || where[b]) fail("LRU list corrupt at block " + std::to_string(b));
    where[b] = 2;
    if (blocks_[b].lru_prev != prev) fail("LRU back link of block " + std::to_string(b));
    if (blocks_[b].ref || !blocks_[b].hashed) fail("cached block " + std::to_string(b) + " in use or unhashed");
  }
  if (count != n_lru_) fail("LRU holds " + std::to_string(count) + " blocks, counter says " + std::to_string(n_lru_));
  for (size_t b = 0; b < n; ++b) {
    if (blocks_[b].ref != refs[b])
      fail("block " + std::to_string(b) + " refcount " + std::to_string(blocks_[b].ref) + " but " +
           std::to_string(refs[b]) + " table entries");
    if (refs[b] == 0 && where[b] == 0) fail("block " + std::to_string(b) + " leaked");
    if (blocks_[b].hashed) {
      auto it = cache_.find(blocks_[b].hash);
      if (it == cache_.end() || it->second != static_cast<int32_t>(b))
        fail("hashed block " + std::to_string(b) + " missing from the index");
    }
  }
  for (const auto& [h, b] : cache_)
    if (!blocks_.at(static_cast<size_t>(b)).hashed || blocks_[b].hash != h) fail("index entry for a stale block");
}

}  // namespace nexus
