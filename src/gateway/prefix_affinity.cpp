#include "gateway/prefix_affinity.h"

#include <nlohmann/json.hpp>

namespace nexus::gateway {

using json = nlohmann::ordered_json;  // the body as the gateway parsed it (proxy_session.h body_json)

namespace {

std::string as_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

namespace {

// An agent's own cache key: Responses' prompt_cache_key (Codex sends its
// thread id), Anthropic's metadata.user_id (Claude Code's holds its
// session id); "" when none.
std::string affinity_key(const json& body) {
  if (auto k = body.find("prompt_cache_key"); k != body.end() && k->is_string()) return k->get<std::string>();
  if (auto m = body.find("metadata"); m != body.end() && m->is_object())
    if (auto u = m->find("user_id"); u != m->end() && u->is_string()) return u->get<std::string>();
  return {};
}

void append_turns(const json& turns, std::string& out) {
  for (const json& m : turns) {
    if (out.size() >= kPrefixBlockBytes * kMaxPrefixBlocks) break;
    if (!m.is_object()) continue;
    if (auto r = m.find("role"); r != m.end()) out += as_text(*r);
    else if (auto t = m.find("type"); t != m.end()) out += as_text(*t);  // a Responses item
    out += '\n';
    if (auto c = m.find("content"); c != m.end()) out += as_text(*c);
    else out += m.dump();
    out += '\n';
  }
}

}  // namespace

std::string prefix_text(const json& body) {
  if (!body.is_object()) return {};
  if (auto it = body.find("prompt"); it != body.end()) {
    // A batch of prompts: its first; a prompt of token ids: the ids as JSON
    // text ("[1,2,...", the same ids give the same leading bytes).
    if (it->is_array() && !it->empty() && (*it)[0].is_string()) return (*it)[0].get<std::string>();
    return as_text(*it);
  }
  std::string out;
  // A key first, as one whole block: requests with the same key share it.
  if (std::string key = affinity_key(body); !key.empty()) {
    key.resize(kPrefixBlockBytes - 1, '\0');
    out = '\x01' + key;
  }
  for (const char* system : {"instructions", "system"})  // Responses, Anthropic
    if (auto it = body.find(system); it != body.end() && !it->is_null()) out += std::string(system) + '\n' + as_text(*it) + '\n';
  if (auto it = body.find("messages"); it != body.end() && it->is_array()) append_turns(*it, out);
  if (auto it = body.find("input"); it != body.end()) {  // Responses
    if (it->is_array()) append_turns(*it, out);
    else out += "user\n" + as_text(*it) + '\n';
  }
  return out;
}

std::vector<uint64_t> prefix_block_hashes(std::string_view text) {
  std::vector<uint64_t> out;
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (size_t b = 0; b < kMaxPrefixBlocks && (b + 1) * kPrefixBlockBytes <= text.size(); ++b) {
    for (size_t i = b * kPrefixBlockBytes; i < (b + 1) * kPrefixBlockBytes; ++i) {
      h ^= static_cast<unsigned char>(text[i]);
      h *= 1099511628211ull;  // FNV prime
    }
    out.push_back(h);
  }
  return out;
}

std::optional<PrefixAffinity::Match> PrefixAffinity::lookup(const std::vector<uint64_t>& hashes) {
  std::lock_guard lock(mu_);
  for (size_t i = hashes.size(); i-- > 0;) {
    auto it = map_.find(hashes[i]);
    if (it == map_.end()) continue;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return Match{it->second.replica, i + 1};
  }
  return std::nullopt;
}

void PrefixAffinity::own(size_t replica, int64_t delta) {
  if (owned_.size() <= replica) owned_.resize(replica + 1);
  owned_[replica] += delta;
}

int64_t PrefixAffinity::owned(size_t replica) {
  std::lock_guard lock(mu_);
  return replica < owned_.size() ? owned_[replica] : 0;
}

void PrefixAffinity::record(const std::vector<uint64_t>& hashes, size_t replica) {
  std::lock_guard lock(mu_);
  for (uint64_t h : hashes) {
    auto it = map_.find(h);
    if (it != map_.end()) {
      own(it->second.replica, -1);
      own(replica, 1);
      it->second.replica = replica;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      continue;
    }
    lru_.push_front(h);
    map_.emplace(h, Entry{replica, lru_.begin()});
    own(replica, 1);
    if (map_.size() > kMaxEntries) {
      auto old = map_.find(lru_.back());
      own(old->second.replica, -1);
      map_.erase(old);
      lru_.pop_back();
    }
  }
}

}  // namespace nexus::gateway
