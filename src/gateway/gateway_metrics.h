// GatewayMetrics: the gateway's own Prometheus series (docs/metrics.md,
// "Gateway"), over metrics::Registry. Every label value is known at startup
// (replicas, outcomes, reasons), so each series is registered once and
// updated lock-free afterwards.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gateway/circuit_breaker.h"
#include "gateway/routing_policy.h"
#include "gateway/ws_transcript.h"
#include "metrics/metrics.h"

namespace nexus::gateway {

// How a client request ended.
enum class Outcome {
  Success,       // 2xx relayed whole
  ClientError,   // a 4xx from the replica, relayed (the replica is fine)
  UpstreamError, // a 5xx relayed, or 502/504 made up after the attempts ran out
  NoReplica,     // 503: no replica could take it
  StreamBroken,  // a stream cut after its first byte: ended with an error event
  ClientGone,    // the client went away first
  Count
};
const char* outcome_name(Outcome o);

// Why an attempt was retried.
// BreakerOpen: the replica's breaker opened while the attempt waited for
// its answer, nothing sent to the client yet (a frozen replica).
enum class RetryReason { Connect, Reset, Timeout, Status5xx, Draining, QueueFull, BreakerOpen, Count };
const char* retry_reason_name(RetryReason r);

enum class FaultKind { Abort, Delay, Count };

class GatewayMetrics {
 public:
  // `tenants`: the API-key tenants' names (none without --api-keys).
  explicit GatewayMetrics(const std::vector<std::string>& tenants = {});

  // Registers the series of replica `index` (the next one: replicas are
  // added in order, up to ReplicaSet::kCapacity) labelled `id`.
  void add_replica(size_t index, const std::string& id);

  struct PerTenant {
    metrics::IntCounter* admitted = nullptr;
    metrics::IntCounter* limited_requests = nullptr;  // 429 on requests per second
    metrics::IntCounter* limited_tokens = nullptr;    // 429 on tokens per minute
    metrics::IntCounter* prompt_tokens = nullptr;
    metrics::IntCounter* completion_tokens = nullptr;
    metrics::Gauge* in_flight = nullptr;
  };
  PerTenant& tenant(size_t i) { return tenants_[i]; }
  metrics::IntCounter& unauthorized() { return *unauthorized_; }
  // The WebSocket sessions relayed, per protocol: nexus_gateway_realtime_*
  // for /v1/realtime, nexus_gateway_responses_ws_* for the Responses API's
  // WebSocket mode.
  metrics::Gauge& ws_active(WsProtocol p) { return *ws_[static_cast<size_t>(p)].active; }
  // Sessions whose replica failed: moved to another replica (`resumed`) or
  // ended (`ended`: no replica, or a transcript the gateway could not keep;
  // docs/gateway.md).
  metrics::IntCounter& ws_failovers(WsProtocol p, bool resumed) {
    return *ws_[static_cast<size_t>(p)].failovers[resumed ? 1 : 0];
  }
  // Queries of death (query_of_death.h): a request or realtime session found
  // to have killed two replicas (`detected`), or refused as one (`refused`).
  metrics::IntCounter& query_of_death(bool detected) { return *query_of_death_[detected ? 0 : 1]; }

  struct PerReplica {
    std::array<metrics::IntCounter*, static_cast<size_t>(Outcome::Count)> requests{};
    metrics::IntCounter* routed = nullptr;
    metrics::IntCounter* attempt_failures = nullptr;
    metrics::IntCounter* streams_broken = nullptr;
    metrics::Gauge* breaker_state = nullptr;
    std::array<metrics::IntCounter*, 3> breaker_transitions{};  // by the state entered
    metrics::Gauge* load_score = nullptr;
    metrics::Gauge* in_flight = nullptr;
    std::array<metrics::IntCounter*, static_cast<size_t>(WsProtocol::Count)> ws_sessions{};  // upgraded
  };

  PerReplica& replica(size_t i) { return replicas_[i]; }
  metrics::IntCounter& no_replica_requests() { return *no_replica_; }
  metrics::IntCounter& retries(RetryReason r) { return *retries_[static_cast<size_t>(r)]; }
  metrics::IntCounter& retry_budget_exhausted() { return *budget_exhausted_; }
  metrics::IntCounter& affinity(AffinityResult r) { return *affinity_[static_cast<size_t>(r)]; }
  metrics::IntCounter& faults(FaultKind k) { return *faults_[static_cast<size_t>(k)]; }
  metrics::Histogram& added_latency() { return *added_latency_; }
  metrics::Gauge& in_flight() { return *in_flight_; }
  void on_breaker_transition(size_t replica, BreakerState to);

  std::string render() const { return registry_.render(); }

 private:
  metrics::Registry registry_;
  std::unique_ptr<PerReplica[]> replicas_;  // ReplicaSet::kCapacity slots, filled by add_replica()
  std::vector<PerTenant> tenants_;
  metrics::IntCounter* unauthorized_ = nullptr;
  struct PerWsProtocol {
    metrics::Gauge* active = nullptr;
    std::array<metrics::IntCounter*, 2> failovers{};  // ended, resumed
  };
  std::array<PerWsProtocol, static_cast<size_t>(WsProtocol::Count)> ws_{};
  std::array<metrics::IntCounter*, 2> query_of_death_{};      // detected, refused
  metrics::IntCounter* no_replica_ = nullptr;
  std::array<metrics::IntCounter*, static_cast<size_t>(RetryReason::Count)> retries_{};
  metrics::IntCounter* budget_exhausted_ = nullptr;
  std::array<metrics::IntCounter*, 4> affinity_{};
  std::array<metrics::IntCounter*, static_cast<size_t>(FaultKind::Count)> faults_{};
  metrics::Histogram* added_latency_ = nullptr;
  metrics::Gauge* in_flight_ = nullptr;
};

}  // namespace nexus::gateway
