#include "gateway/gateway_metrics.h"

#include <fmt/format.h>

#include "gateway/replica_set.h"

namespace nexus::gateway {

namespace {

// Each relayed WebSocket protocol's series (WsProtocol order).
struct WsSeries {
  const char* prefix;
  const char* what;
};
constexpr WsSeries kWs[] = {{"realtime", "/v1/realtime WebSocket sessions"},
                            {"responses_ws", "Responses API WebSocket-mode connections (GET /v1/responses)"}};
static_assert(std::size(kWs) == static_cast<size_t>(WsProtocol::Count));

}  // namespace

const char* outcome_name(Outcome o) {
  static const char* const names[] = {"success", "client_error", "upstream_error",
                                      "no_replica", "stream_broken", "client_gone"};
  return names[static_cast<size_t>(o)];
}

const char* retry_reason_name(RetryReason r) {
  static const char* const names[] = {"connect", "reset", "timeout", "status_5xx", "draining", "queue_full", "breaker_open"};
  return names[static_cast<size_t>(r)];
}

void GatewayMetrics::add_replica(size_t index, const std::string& id) {
  auto& r = registry_;
  PerReplica& p = replicas_[index];
  for (size_t o = 0; o < p.requests.size(); ++o) {
    if (static_cast<Outcome>(o) == Outcome::NoReplica) continue;
    p.requests[o] = &r.int_counter("nexus_gateway_requests_total", "client requests by the replica that answered and how they ended",
                                   {{"replica", id}, {"outcome", outcome_name(static_cast<Outcome>(o))}});
  }
  p.routed = &r.int_counter("nexus_gateway_routing_decisions_total", "attempts the routing policy sent to each replica",
                            {{"replica", id}});
  p.attempt_failures = &r.int_counter("nexus_gateway_attempt_failures_total",
                                      "attempts that failed on the replica (connect, reset, timeout, 5xx)", {{"replica", id}});
  p.streams_broken = &r.int_counter("nexus_gateway_streams_broken_total",
                                    "streams cut by the replica after their first byte (ended with an error event)",
                                    {{"replica", id}});
  p.breaker_state = &r.gauge("nexus_gateway_breaker_state", "circuit breaker state: 0 closed, 1 open, 2 half-open",
                             {{"replica", id}});
  for (size_t s = 0; s < 3; ++s)
    p.breaker_transitions[s] = &r.int_counter("nexus_gateway_breaker_transitions_total", "breaker state changes by the state entered",
                                              {{"replica", id}, {"to", breaker_state_name(static_cast<BreakerState>(s))}});
  p.load_score = &r.gauge("nexus_gateway_replica_load_score", "the routing load score (load_state.h) at the last poll",
                          {{"replica", id}});
  p.in_flight = &r.gauge("nexus_gateway_replica_in_flight", "requests the gateway has in flight on the replica",
                         {{"replica", id}});
  for (size_t w = 0; w < p.ws_sessions.size(); ++w)
    p.ws_sessions[w] = &r.int_counter(fmt::format("nexus_gateway_{}_sessions_total", kWs[w].prefix),
                                      fmt::format("{} relayed to the replica (upgraded)", kWs[w].what), {{"replica", id}});
}

GatewayMetrics::GatewayMetrics(const std::vector<std::string>& tenants)
    : replicas_(std::make_unique<PerReplica[]>(ReplicaSet::kCapacity)) {
  auto& r = registry_;
  no_replica_ = &r.int_counter("nexus_gateway_requests_total", "client requests by the replica that answered and how they ended",
                               {{"replica", "none"}, {"outcome", "no_replica"}});
  for (size_t i = 0; i < retries_.size(); ++i)
    retries_[i] = &r.int_counter("nexus_gateway_retries_total", "attempts retried, by the reason the previous one failed",
                                 {{"reason", retry_reason_name(static_cast<RetryReason>(i))}});
  budget_exhausted_ = &r.int_counter("nexus_gateway_retry_budget_exhausted_total",
                                     "failed attempts not retried because the retry budget was spent");
  for (size_t i = 1; i < affinity_.size(); ++i)
    affinity_[i] = &r.int_counter("nexus_gateway_prefix_affinity_total", "prefix policy decisions: hit, miss, overflow (the replica was too busy)",
                                  {{"result", affinity_result_name(static_cast<AffinityResult>(i))}});
  affinity_[0] = affinity_[2];  // AffinityResult::None is never counted; keep the slot valid
  faults_[0] = &r.int_counter("nexus_gateway_faults_injected_total", "attempts changed by --fault", {{"kind", "abort"}});
  faults_[1] = &r.int_counter("nexus_gateway_faults_injected_total", "attempts changed by --fault", {{"kind", "delay"}});
  added_latency_ = &r.histogram("nexus_gateway_added_latency_seconds",
                                "time the gateway added before the first response byte: routing, connecting, retries, "
                                "backoff and relaying (the replica's own time excluded)",
                                metrics::latency_buckets_seconds());
  in_flight_ = &r.gauge("nexus_gateway_in_flight_requests", "client requests being proxied");
  for (size_t w = 0; w < ws_.size(); ++w) {
    ws_[w].active = &r.gauge(fmt::format("nexus_gateway_{}_sessions", kWs[w].prefix),
                             fmt::format("{} being relayed", kWs[w].what));
    for (size_t i = 0; i < 2; ++i)
      ws_[w].failovers[i] = &r.int_counter(fmt::format("nexus_gateway_{}_failovers_total", kWs[w].prefix),
                                           fmt::format("{} whose replica failed: resumed on another replica, or ended",
                                                       kWs[w].what),
                                           {{"result", i ? "resumed" : "ended"}});
  }
  for (size_t i = 0; i < 2; ++i)
    query_of_death_[i] = &r.int_counter("nexus_gateway_query_of_death_total",
                                        "requests and realtime sessions in flight on two replicas that both died "
                                        "(detected), and requests refused as such for a while (refused)",
                                        {{"result", i ? "refused" : "detected"}});
  unauthorized_ = &r.int_counter("nexus_gateway_unauthorized_total",
                                 "requests refused with 401 invalid_api_key (--api-keys: no key or an unknown one)");
  tenants_.resize(tenants.size());
  for (size_t i = 0; i < tenants.size(); ++i) {
    PerTenant& t = tenants_[i];
    const std::string& name = tenants[i];
    t.admitted = &r.int_counter("nexus_gateway_tenant_requests_total", "requests admitted by the tenant's limits",
                                {{"tenant", name}});
    t.limited_requests = &r.int_counter("nexus_gateway_rate_limited_total",
                                        "requests refused with 429 by a tenant's limit",
                                        {{"tenant", name}, {"limit", "requests_per_second"}});
    t.limited_tokens = &r.int_counter("nexus_gateway_rate_limited_total", "requests refused with 429 by a tenant's limit",
                                      {{"tenant", name}, {"limit", "tokens_per_minute"}});
    t.prompt_tokens = &r.int_counter("nexus_gateway_tenant_tokens_total",
                                     "tokens of the tenant's answered requests, from the replicas' usage",
                                     {{"tenant", name}, {"kind", "prompt"}});
    t.completion_tokens = &r.int_counter("nexus_gateway_tenant_tokens_total",
                                         "tokens of the tenant's answered requests, from the replicas' usage",
                                         {{"tenant", name}, {"kind", "completion"}});
    t.in_flight = &r.gauge("nexus_gateway_tenant_in_flight_requests", "the tenant's requests being proxied",
                           {{"tenant", name}});
  }
}

void GatewayMetrics::on_breaker_transition(size_t replica, BreakerState to) {
  PerReplica& p = replicas_[replica];
  p.breaker_state->set(static_cast<double>(to));
  p.breaker_transitions[static_cast<size_t>(to)]->inc();
}

}  // namespace nexus::gateway
