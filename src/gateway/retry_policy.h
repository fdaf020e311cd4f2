// Retries: which failed attempts may be retried, how long to wait, and how
// many retries the recent traffic allows.
//
// Backoff: "full jitter" (AWS Architecture Blog, "Exponential Backoff And
// Jitter", 2015): before retry n (1-based) wait uniform[0, min(max_backoff,
// base_backoff * 2^(n-1))].
// Budget (Finagle's RetryBudget, Linkerd's retry budgets): over the last
// `window`, retries may be at most budget_ratio * requests + min_retries
// (the floor lets a quiet gateway still retry), so a sick cluster gets at
// most (1 + ratio) times its normal traffic instead of max_attempts times.
// Only attempts of which nothing reached the client are retried (the proxy
// session decides that; this file only counts).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>

namespace nexus::gateway {

struct RetryOptions {
  int max_attempts = 4;  // first try included
  std::chrono::milliseconds base_backoff{5};
  std::chrono::milliseconds max_backoff{200};
  double budget_ratio = 0.2;
  int min_retries = 20;  // per window
};

// The wait before retry `retry` (1 = the first retry), full jitter.
std::chrono::milliseconds backoff_delay(int retry, const RetryOptions& opts, std::mt19937_64& rng);

// Thread-safe counts of requests and retries over a sliding window of 10
// one-second buckets.
class RetryBudget {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RetryBudget(RetryOptions opts) : opts_(opts) {}
  void record_request(Clock::time_point now);
  // Takes one retry from the budget; false when it is spent.
  bool try_spend(Clock::time_point now);

 private:
  static constexpr int kBuckets = 10;  // of one second each
  struct Bucket {
    int64_t second = -1;
    int64_t requests = 0, retries = 0;
  };
  Bucket& bucket(Clock::time_point now);  // under mu_

  RetryOptions opts_;
  std::mutex mu_;
  std::array<Bucket, kBuckets> buckets_{};
};

}  // namespace nexus::gateway
