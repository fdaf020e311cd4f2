// TokenBucket: a rate limit as a bucket of credit (the classic token bucket,
// RFC 2697's shape): it holds up to `capacity` units, refills at `rate`
// units per second, and starts full. Used per tenant (tenant_limiter.h) for
// requests per second (capacity = one second's worth, at least 1) and for
// tokens per minute (capacity = one minute's worth).
//
// Two ways to spend:
//   try_take(n)   admission of a cost known up front (a request): takes n
//                 units if the bucket holds them, else leaves it alone;
//   charge(n)     a cost known only afterwards (a response's tokens): taken
//                 even if that makes the level negative (a debt the refill
//                 pays back), so a tenant can overrun by at most one request.
// wait_for(n): seconds until the level reaches n (0 when it already has).
// Thread-safe (a mutex; held for a few arithmetic operations).
#pragma once

#include <chrono>
#include <mutex>

namespace nexus::gateway {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  // rate: units per second (> 0); capacity: units (> 0).
  TokenBucket(double rate, double capacity, Clock::time_point now = Clock::now());

  bool try_take(double n, Clock::time_point now);
  void charge(double n, Clock::time_point now);
  double wait_for(double n, Clock::time_point now);
  double level(Clock::time_point now);

 private:
  void refill(Clock::time_point now);  // under mu_

  const double rate_, capacity_;
  std::mutex mu_;
  double level_;
  Clock::time_point last_;
};

}  // namespace nexus::gateway
