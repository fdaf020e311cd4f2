// GatewayContext: the state the gateway's sessions share (internal to
// GatewayServer): options, replicas, router, retry budget, metrics.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "gateway/gateway_metrics.h"
#include "gateway/gateway_server.h"
#include "gateway/replica.h"
#include "gateway/retry_policy.h"
#include "gateway/routing_policy.h"

namespace nexus::gateway {

class ProxySession;

struct GatewayContext {
  GatewayContext(GatewayOptions o, const std::vector<std::string>& replica_ids)
      : opts(std::move(o)), router(opts.policy, opts.prefix_threshold), budget(opts.retry), metrics(replica_ids) {}

  GatewayOptions opts;
  std::vector<std::unique_ptr<Replica>> replicas;
  Router router;
  RetryBudget budget;
  GatewayMetrics metrics;
  std::atomic<bool> draining{false};
  std::atomic<int32_t> in_flight{0};
  std::atomic<uint64_t> session_seed{1};  // seeds each session's random numbers
  // Live sessions, for stop(); guarded by sessions_mu.
  std::mutex sessions_mu;
  std::unordered_map<ProxySession*, std::weak_ptr<ProxySession>> sessions;
};

}  // namespace nexus::gateway
