// CircuitBreaker: whether a replica gets traffic, from its recent failures
// (the pattern of Nygard's "Release It!", as Envoy's outlier detection and
// resilience4j implement it).
//
//   Closed    traffic flows; failures are counted over `window`; at
//             `failure_threshold` failures in the window -> Open.
//   Open      no traffic for `cool_down`; then -> HalfOpen.
//   HalfOpen  at most `half_open_probes` requests at a time are let through
//             as probes; `successes_to_close` successes (probes or active
//             health checks) -> Closed; any failure -> Open again.
//
// Failures are connect errors, resets, timeouts and 5xx answers (passive), and
// failed health checks (active). Thread-safe (one mutex); `on_transition`
// runs under it and must only touch atomics (metrics).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace nexus::gateway {

enum class BreakerState { Closed = 0, Open = 1, HalfOpen = 2 };
const char* breaker_state_name(BreakerState s);  // "closed", "open", "half_open"

struct BreakerOptions {
  int failure_threshold = 5;
  std::chrono::milliseconds window{10'000};
  std::chrono::milliseconds cool_down{1'000};
  int half_open_probes = 1;
  int successes_to_close = 1;
};

// What try_acquire() granted: nothing, a normal request, or a half-open probe
// (whose end must be reported with probe = true).
enum class Admission { Denied, Admitted, Probe };

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  explicit CircuitBreaker(BreakerOptions opts = {}, std::function<void(BreakerState from, BreakerState to)> on_transition = {});

  // Takes a probe slot in HalfOpen; Open turns HalfOpen once cool_down passed.
  Admission try_acquire(Clock::time_point now);
  // Whether try_acquire() would admit now (routing's candidate filter).
  bool would_admit(Clock::time_point now);
  // `probe`: the request held a HalfOpen probe slot (released here).
  void record_success(Clock::time_point now, bool probe = false);
  void record_failure(Clock::time_point now, bool probe = false);
  BreakerState state() const;

 private:
  void move_to(BreakerState s, Clock::time_point now);  // under mu_
  void refresh(Clock::time_point now);                  // Open -> HalfOpen after cool_down

  BreakerOptions opts_;
  std::function<void(BreakerState, BreakerState)> on_transition_;
  mutable std::mutex mu_;
  BreakerState state_ = BreakerState::Closed;
  std::deque<Clock::time_point> failures_;  // Closed: within window
  Clock::time_point opened_at_{};
  int probes_in_flight_ = 0;
  int half_open_successes_ = 0;
};

}  // namespace nexus::gateway
