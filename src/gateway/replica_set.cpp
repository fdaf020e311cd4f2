#include "gateway/replica_set.h"

#include <string>

#include "util/error.h"

namespace nexus::gateway {

Replica& ReplicaSet::add(std::unique_ptr<Replica> r) {
  const size_t n = size_.load(std::memory_order_relaxed);
  if (n == kCapacity) throw Error("the gateway holds at most " + std::to_string(kCapacity) + " replicas");
  slots_[n] = std::move(r);
  size_.store(n + 1, std::memory_order_release);
  return *slots_[n];
}

}  // namespace nexus::gateway
