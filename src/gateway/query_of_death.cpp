#include "gateway/query_of_death.h"

#include <openssl/evp.h>

#include <cstring>
#include <memory>
#include <utility>

namespace nexus::gateway {

uint64_t QueryOfDeath::fingerprint(std::string_view kind, std::string_view bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const char sep = '\n';  // (a kind has no newline: "a\nbc" and "ab\nc" differ)
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), kind.data(), kind.size()) != 1 || EVP_DigestUpdate(ctx.get(), &sep, 1) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), md, &len) != 1)
    return 0;  // (OpenSSL out of memory: every text shares one fingerprint, which only ever over-refuses)
  uint64_t fp = 0;
  std::memcpy(&fp, md, sizeof fp);
  return fp;
}

QueryOfDeath::Death QueryOfDeath::record_death(uint64_t fp, size_t replica, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(fp);
  if (it != entries_.end() && expired(it->second, now)) {
    entries_.erase(it);
    it = entries_.end();
  }
  if (it == entries_.end()) {
    entries_.emplace(fp, Entry{replica, now, now, {}});
    order_.emplace_back(fp, now);
    evict(now);
    return Death::Suspect;
  }
  Entry& e = it->second;
  e.died = now;
  if (now < e.refused_until) return Death::Refused;
  if (e.replica == replica || opts_.refuse_for.count() == 0) return Death::Suspect;
  e.refused_until = now + opts_.refuse_for;
  const Clock::rep until = e.refused_until.time_since_epoch().count();
  if (until > refusing_until_.load(std::memory_order_relaxed)) refusing_until_.store(until, std::memory_order_relaxed);
  return Death::Detected;
}

bool QueryOfDeath::refused(uint64_t fp, Clock::time_point now) {
  if (!refusing(now)) return false;
  std::lock_guard lock(mu_);
  const auto it = entries_.find(fp);
  return it != entries_.end() && now < it->second.refused_until;
}

size_t QueryOfDeath::size() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void QueryOfDeath::evict(Clock::time_point now) {
  auto current = [&](const std::pair<uint64_t, Clock::time_point>& o) {  // (not a later entry of the same fingerprint)
    const auto it = entries_.find(o.first);
    return it != entries_.end() && it->second.added == o.second;
  };
  // The expired at the front go at each insertion; past the bound, every
  // expired one (a refusal outlives many suspects), then the oldest.
  while (!order_.empty() && (!current(order_.front()) || expired(entries_.at(order_.front().first), now))) {
    if (current(order_.front())) entries_.erase(order_.front().first);
    order_.pop_front();
  }
  if (entries_.size() <= kMaxEntries) return;
  std::erase_if(entries_, [&](const auto& kv) { return expired(kv.second, now); });
  std::erase_if(order_, [&](const auto& o) { return !current(o); });
  for (; entries_.size() > kMaxEntries; order_.pop_front()) entries_.erase(order_.front().first);
}

}  // namespace nexus::gateway
