#include "engine/block_pool.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace nexus {

BlockPool::BlockPool(int32_t n_blocks, int32_t block_size) : block_size_(block_size) {
  blocks_.resize(static_cast<size_t>(n_blocks));
  block_tokens_.resize(static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size));
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is handed out first
}

int32_t BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = lru_head_;  // evict the least recently released cached block
    lru_remove(b);
    cache_.erase(blocks_[b].hash);
    blocks_[b].hashed = false;
    ++evictions_;
  }
  blocks_[b].ref = 1;
  return b;
}

void BlockPool::ref(int32_t b) {
  if (blocks_[b].ref++ == 0) lru_remove(b);
}

void BlockPool::unref(int32_t b) {
  if (--blocks_[b].ref > 0) return;
  if (blocks_[b].hashed) lru_push(b);
  else free_.push_back(b);
}

int32_t BlockPool::find(uint64_t h, uint64_t parent, const int32_t* tokens) const {
  auto hit = cache_.find(h);
  if (hit == cache_.end()) return -1;
  const int32_t b = hit->second;
  const bool same = blocks_[b].parent == parent &&
                    std::equal(tokens, tokens + block_size_,
                               block_tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
  return same ? b : -1;  // otherwise a hash collision
}

void BlockPool::publish(int32_t b, uint64_t h, uint64_t parent, const int32_t* tokens) {
  if (blocks_[b].hashed || !cache_.emplace(h, b).second) return;
  blocks_[b].hashed = true;
  blocks_[b].hash = h;
  blocks_[b].parent = parent;
  std::copy(tokens, tokens + block_size_, block_tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
}

void BlockPool::lru_push(int32_t b) {
  blocks_[b].lru_prev = lru_tail_;
  blocks_[b].lru_next = -1;
  if (lru_tail_ >= 0) blocks_[lru_tail_].lru_next = b;
  else lru_head_ = b;
  lru_tail_ = b;
  ++n_lru_;
}

void BlockPool::lru_remove(int32_t b) {
  Block& k = blocks_[b];
  if (k.lru_prev >= 0) blocks_[k.lru_prev].lru_next = k.lru_next;
  else lru_head_ = k.lru_next;
  if (k.lru_next >= 0) blocks_[k.lru_next].lru_prev = k.lru_prev;
  else lru_tail_ = k.lru_prev;
  k.lru_prev = k.lru_next = -1;
  --n_lru_;
}

void BlockPool::validate(std::span<const int32_t> refs, const char* what) const {
  auto fail = [what](const std::string& m) { throw Error(std::string("block manager invariant (") + what + "): " + m); };
  const size_t n = blocks_.size();
  if (refs.size() != n) fail("reference table of the wrong size");
  std::vector<int32_t> where(n, 0);  // 1 free, 2 cached
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
