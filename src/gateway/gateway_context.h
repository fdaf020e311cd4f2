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
#include "gateway/query_of_death.h"
#include "gateway/replica_set.h"
#include "gateway/retry_policy.h"
#include "gateway/routing_policy.h"
#include "gateway/tenant_limiter.h"
#include "server/cors.h"

namespace nexus::gateway {

class ProxySession;

struct GatewayContext {
  explicit GatewayContext(GatewayOptions o)
      : opts(std::move(o)),
        router(opts.policy, opts.prefix_threshold),
        budget(opts.retry),
        limiter(opts.api_keys ? std::make_unique<TenantLimiter>(*opts.api_keys) : nullptr),
        metrics(tenant_names(limiter.get())),
        cors(opts.cors_allow_origins),
        qod(opts.query_of_death) {}

  static std::vector<std::string> tenant_names(const TenantLimiter* l) {
    std::vector<std::string> names;
    if (l)
      for (const Tenant& t : l->tenants()) names.push_back(t.name);
    return names;
  }

  GatewayOptions opts;
  ReplicaSet replicas;
  Router router;
  RetryBudget budget;
  std::unique_ptr<TenantLimiter> limiter;  // null without --api-keys
  GatewayMetrics metrics;
  server::CorsPolicy cors;  // off (not enabled()) without --cors-allow-origin
  QueryOfDeath qod;
  std::atomic<bool> draining{false};
  std::atomic<int32_t> in_flight{0};
  std::atomic<uint64_t> session_seed{1};  // seeds each session's random numbers
  // Live sessions, for stop(); guarded by sessions_mu.
  std::mutex sessions_mu;
  std::unordered_map<ProxySession*, std::weak_ptr<ProxySession>> sessions;
};

}  // namespace nexus::gateway
