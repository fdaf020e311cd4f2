#include "gateway/retry_policy.h"

#include <algorithm>

namespace nexus::gateway {

std::chrono::milliseconds backoff_delay(int retry, const RetryOptions& opts, std::mt19937_64& rng) {
  const int shift = std::clamp(retry - 1, 0, 20);
  const int64_t cap = std::min<int64_t>(opts.max_backoff.count(), opts.base_backoff.count() << shift);
  if (cap <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, cap)(rng));
}

RetryBudget::Bucket& RetryBudget::bucket(Clock::time_point now) {
  const int64_t s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  Bucket& b = buckets_[static_cast<size_t>(s % kBuckets)];
  if (b.second != s) b = Bucket{s, 0, 0};
  return b;
}

void RetryBudget::record_request(Clock::time_point now) {
  std::lock_guard lock(mu_);
  ++bucket(now).requests;
}

bool RetryBudget::try_spend(Clock::time_point now) {
  std::lock_guard lock(mu_);
  Bucket& current = bucket(now);
  const int64_t s = current.second;
  int64_t requests = 0, retries = 0;
  for (const Bucket& b : buckets_) {
    if (b.second > s - kBuckets) {
      requests += b.requests;
      retries += b.retries;
    }
  }
  if (static_cast<double>(retries) >= opts_.budget_ratio * static_cast<double>(requests) + opts_.min_retries)
    return false;
  ++current.retries;
  return true;
}

}  // namespace nexus::gateway
