// ReplicaSet: the gateway's replicas, a list that only grows.
//
// Static replicas (--replica) are added at start-up; DNS discovery
// (dns_discovery.h) adds the addresses a name comes to resolve to while the
// gateway runs. A replica is never removed: sessions hold plain pointers to
// one and its index names its metrics, so one that leaves the DNS answer is
// unlisted instead (Replica::listed) and listed again if it comes back.
//
// Threads: one writer at a time (the constructor's thread, then the
// discovery strand) appends; any thread reads. Each slot is filled before
// the size that covers it is published (release/acquire), and slots never
// move (a fixed array of kCapacity), so readers need no lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "gateway/replica.h"

namespace nexus::gateway {

class ReplicaSet {
 public:
  static constexpr size_t kCapacity = 256;

  ReplicaSet() : slots_(std::make_unique<std::unique_ptr<Replica>[]>(kCapacity)) {}

  // Appends r (its index must be size()); throws nexus::Error when full.
  Replica& add(std::unique_ptr<Replica> r);

  size_t size() const { return size_.load(std::memory_order_acquire); }
  bool full() const { return size() == kCapacity; }
  const std::unique_ptr<Replica>& operator[](size_t i) const { return slots_[i]; }
  // The replicas added so far (a range-for reads size() once, at its start).
  const std::unique_ptr<Replica>* begin() const { return slots_.get(); }
  const std::unique_ptr<Replica>* end() const { return slots_.get() + size(); }

 private:
  std::unique_ptr<std::unique_ptr<Replica>[]> slots_;
  std::atomic<size_t> size_{0};
};

}  // namespace nexus::gateway
