// ResponseStore: the responses kept for previous_response_id and GET/DELETE
// /v1/responses/{id} (OpenAI's `store`), bounded in bytes (--responses-store-mib),
// least recently used first out.
//
// A continuation re-renders the stored transcript plus the new input; the
// engine's prefix cache then finds the earlier turn's KV blocks (as long as
// they were not evicted), so only the new tokens are prefilled.
//
// Threading: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_template.h"

namespace nexus::server {

struct StoredResponse {
  nlohmann::json response;                  // the response object as returned
  nlohmann::ordered_json input_items;       // this request's input items
  std::vector<ChatMessage> transcript;      // everything before, the input and the output (no instructions)
};

class ResponseStore {
 public:
  static constexpr size_t kDefaultBytes = size_t{256} << 20;  // 256 MiB

  explicit ResponseStore(size_t max_bytes = kDefaultBytes) : max_bytes_(max_bytes) {}

  // Keeps `r` under `id` (replacing one there), then drops the least
  // recently used until the total fits; a response larger than the whole
  // budget is not kept.
  void put(const std::string& id, StoredResponse r);
  // A copy (nullptr when absent); marks it recently used.
  std::shared_ptr<const StoredResponse> get(const std::string& id) const;
  bool erase(const std::string& id);

  size_t bytes() const;
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> value;
    size_t bytes = 0;
    std::list<std::string>::iterator lru;
  };
  void drop(std::unordered_map<std::string, Entry>::iterator it);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  mutable std::list<std::string> lru_;  // front: most recent
  std::unordered_map<std::string, Entry> entries_;
  size_t bytes_ = 0;
};

}  // namespace nexus::server
