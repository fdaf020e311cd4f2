// QueryOfDeath: requests that kill replicas, kept from killing the fleet
// (docs/gateway.md, "Query of death").
//
// A request that crashes its replica (a parser or template bug it hits) is,
// to the gateway, a replica whose connection died with the request in
// flight: retried elsewhere, it crashes the next replica, and so on through
// the fleet. The gateway cannot see why a replica died, so it counts:
//
//   a death    a replica's connection ended (reset, EOF) with the request
//              sent and no answer, while the replica was not already failing
//              (its last health probe answered, its breaker closed: else the
//              death says nothing about the request);
//   suspect    a fingerprint with one death, on one replica, in the last
//              `suspect_window`;
//   refused    a fingerprint that died on a second replica within that
//              window: a query of death. The gateway answers it 502
//              `query_of_death` without sending it to any replica for
//              `refuse_for`.
//
// A fingerprint is the first 64 bits of SHA-256 over a kind ("POST
// /v1/completions", "realtime") and the exact bytes (a request body, a
// realtime event): not forgeable into a collision with someone else's
// request, but a client that changes one byte of its query of death gets a
// new fingerprint (the fix of a query of death is in the replica; this
// only bounds what one costs: two replicas).
//
// Bounded: at most kMaxEntries fingerprints (suspects expire after the
// window, refusals after refuse_for; past the bound the oldest go first).
// Thread-safe (one mutex; refusing() first reads an atomic, so a gateway
// with nothing refused hashes nothing).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace nexus::gateway {

struct QueryOfDeathOptions {
  std::chrono::milliseconds suspect_window{60'000};
  std::chrono::milliseconds refuse_for{300'000};  // 0 = the containment is off: nothing is refused
};

class QueryOfDeath {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxEntries = 4096;

  explicit QueryOfDeath(QueryOfDeathOptions opts = {}) : opts_(opts) {}

  static uint64_t fingerprint(std::string_view kind, std::string_view bytes);

  enum class Death {
    Suspect,   // the first death of `fp` (or another on the same replica)
    Detected,  // a death on a second replica: refused from now on
    Refused,   // already refused
  };
  // A replica (index) died with `fp` in flight.
  Death record_death(uint64_t fp, size_t replica, Clock::time_point now);
  // Whether `fp` is refused now.
  bool refused(uint64_t fp, Clock::time_point now);
  // Whether any fingerprint may be refused now (lock-free: callers skip
  // the hashing while nothing is).
  bool refusing(Clock::time_point now) const {
    return now.time_since_epoch().count() < refusing_until_.load(std::memory_order_relaxed);
  }
  size_t size();

 private:
  struct Entry {
    size_t replica = 0;                 // where it died first
    Clock::time_point added{};          // its first death (its place in order_)
    Clock::time_point died{};           // its last death
    Clock::time_point refused_until{};  // past: not refused
  };
  bool expired(const Entry& e, Clock::time_point now) const {
    return now >= e.refused_until && now - e.died >= opts_.suspect_window;
  }
  void evict(Clock::time_point now);  // under mu_

  QueryOfDeathOptions opts_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::deque<std::pair<uint64_t, Clock::time_point>> order_;  // (fingerprint, added), oldest first
  std::atomic<Clock::rep> refusing_until_{0};
};

}  // namespace nexus::gateway
