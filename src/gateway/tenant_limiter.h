// TenantLimiter: the gateway's access check (docs/gateway.md "API keys and
// quotas"): who a request is (its bearer key, api_keys.h) and whether its
// tenant may send it now (token buckets, token_bucket.h).
//
// Per tenant, each limit it has:
//   requests_per_second  a bucket of max(1, rate) requests refilled at
//                        `rate` a second; a request takes one at admission;
//   tokens_per_minute    a bucket of one minute's tokens refilled at
//                        rate / 60 a second; a request is admitted while the
//                        bucket holds at least one token, and its prompt +
//                        completion tokens (the replica's `usage`,
//                        stream_usage.h) are charged when its response ends.
//                        Requests in flight when the bucket runs dry still
//                        finish and are charged, so a tenant overruns by at
//                        most what it had in flight.
// A refusal says when to come back: Retry-After = the whole seconds (at
// least 1) until the emptied bucket can admit again.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/api_keys.h"
#include "gateway/stream_usage.h"
#include "gateway/token_bucket.h"

namespace nexus::gateway {

enum class AccessResult { Admitted, Unauthorized, RequestsLimited, TokensLimited };

struct AccessVerdict {
  AccessResult result = AccessResult::Unauthorized;
  size_t tenant = 0;            // Admitted, *Limited: the tenant's index
  bool key_presented = false;   // Unauthorized: a bearer key was sent (but unknown)
  int retry_after_seconds = 0;  // *Limited
};

class TenantLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TenantLimiter(ApiKeyTable table, Clock::time_point now = Clock::now());

  // `authorization`: the request's Authorization header ("" when none).
  AccessVerdict admit(std::string_view authorization, Clock::time_point now);
  // Charges an admitted request's tokens to its tenant.
  void charge(size_t tenant, const TokenUsage& usage, Clock::time_point now);

  const std::vector<Tenant>& tenants() const { return table_.tenants; }

 private:
  struct Buckets {
    std::unique_ptr<TokenBucket> requests, tokens;  // null = no such limit
  };
  ApiKeyTable table_;
  std::vector<Buckets> buckets_;  // by tenant
};

// The 429 body (OpenAI's shape: code rate_limit_exceeded, type "requests"
// or "tokens").
std::string rate_limit_body(const Tenant& tenant, AccessResult which, int retry_after_seconds);

}  // namespace nexus::gateway
