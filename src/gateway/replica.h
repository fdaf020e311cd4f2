// Replica: one `nexus serve` behind the gateway, and what the gateway knows
// of it: its address, connection pool, load (load_state.h), circuit breaker
// (circuit_breaker.h), and whether it said it is draining (GET /load's
// "draining", or a 503 server_shutting_down answer). A draining replica gets
// no new requests until a poll says it stopped draining. One that DNS
// discovery no longer lists (replica_set.h) gets none either.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "gateway/circuit_breaker.h"
#include "gateway/connection_pool.h"
#include "gateway/load_state.h"
#include "loadgen/url.h"

namespace nexus::gateway {

struct Replica {
  Replica(size_t index, const loadgen::ServerUrl& url, boost::asio::any_io_executor ex, BreakerOptions breaker_opts,
          std::function<void(BreakerState, BreakerState)> on_transition)
      : index(index),
        url(url),
        id(url.host + ":" + url.port),
        pool(std::move(ex), url.host, url.port),
        breaker(breaker_opts, std::move(on_transition)) {}

  // Whether its health probes were failing already before `t` (a death
  // then says nothing about the request in flight: query_of_death.h).
  bool failing_before(CircuitBreaker::Clock::time_point t) const {
    const auto since = probe_failing_since.load();
    return since != 0 && since < t.time_since_epoch().count();
  }

  // Listed, not draining and the breaker admits (routing's filter).
  bool available(CircuitBreaker::Clock::time_point now) {
    return listed.load() && !draining.load() && breaker.would_admit(now);
  }

  size_t index;
  loadgen::ServerUrl url;
  std::string id;  // host:port, the metrics label
  ConnectionPool pool;
  LoadState load;
  CircuitBreaker breaker;
  std::atomic<bool> draining{false};
  std::atomic<bool> listed{true};  // false: its DNS name no longer resolves to it
  // When its health probes began to fail (steady_clock ticks), 0 while the
  // last one succeeded (health_checker.h).
  std::atomic<CircuitBreaker::Clock::rep> probe_failing_since{0};
};

}  // namespace nexus::gateway
