#include "server/responses/response_store.h"

namespace nexus::server {

namespace {

size_t footprint(const std::string& id, const StoredResponse& r) {
  size_t n = id.size() + r.response.dump().size() + r.input_items.dump().size();
  for (const ChatMessage& m : r.transcript)
    n += sizeof(ChatMessage) + m.content.size() + m.tool_call_id.size() + m.name.size() +
         (m.tool_calls.is_null() ? 0 : m.tool_calls.dump().size());
  return n;
}

}  // namespace

void ResponseStore::drop(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void ResponseStore::put(const std::string& id, StoredResponse r) {
  const size_t n = footprint(id, r);
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) drop(it);
  if (n > max_bytes_) return;
  lru_.push_front(id);
  entries_[id] = Entry{std::make_shared<const StoredResponse>(std::move(r)), n, lru_.begin()};
  bytes_ += n;
  while (bytes_ > max_bytes_) drop(entries_.find(lru_.back()));
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  drop(it);
  return true;
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace nexus::server
