#include "gateway/token_bucket.h"

#include <algorithm>

namespace nexus::gateway {

TokenBucket::TokenBucket(double rate, double capacity, Clock::time_point now)
    : rate_(rate), capacity_(capacity), level_(capacity), last_(now) {}

void TokenBucket::refill(Clock::time_point now) {
  if (now <= last_) return;  // (a caller's older time point: no refill, never a drain)
  level_ = std::min(capacity_, level_ + rate_ * std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

bool TokenBucket::try_take(double n, Clock::time_point now) {
  std::lock_guard lock(mu_);
  refill(now);
  if (level_ < n) return false;
  level_ -= n;
  return true;
}

void TokenBucket::charge(double n, Clock::time_point now) {
  std::lock_guard lock(mu_);
  refill(now);
  level_ -= n;
}

double TokenBucket::wait_for(double n, Clock::time_point now) {
  std::lock_guard lock(mu_);
  refill(now);
  return level_ >= n ? 0.0 : (n - level_) / rate_;
}

double TokenBucket::level(Clock::time_point now) {
  std::lock_guard lock(mu_);
  refill(now);
  return level_;
}

}  // namespace nexus::gateway
