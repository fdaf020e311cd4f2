#include "gateway/tenant_limiter.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/api_key.h"

namespace nexus::gateway {

namespace {

int whole_seconds(double s) { return std::max(1, static_cast<int>(std::ceil(s))); }

}  // namespace

TenantLimiter::TenantLimiter(ApiKeyTable table, Clock::time_point now) : table_(std::move(table)) {
  for (const Tenant& t : table_.tenants) {
    Buckets b;
    if (const auto rps = t.limits.requests_per_second)
      b.requests = std::make_unique<TokenBucket>(*rps, std::max(1.0, *rps), now);
    if (const auto tpm = t.limits.tokens_per_minute) b.tokens = std::make_unique<TokenBucket>(*tpm / 60, *tpm, now);
    buckets_.push_back(std::move(b));
  }
}

AccessVerdict TenantLimiter::admit(std::string_view authorization, Clock::time_point now) {
  AccessVerdict v;
  const auto key = server::bearer_token(authorization);
  v.key_presented = key.has_value();
  const auto tenant = key ? table_.find(*key) : std::nullopt;
  if (!tenant) return v;
  v.tenant = *tenant;
  Buckets& b = buckets_[*tenant];
  // The token bucket first: a request it refuses must not spend a request.
  if (b.tokens && b.tokens->level(now) < 1) {
    v.result = AccessResult::TokensLimited;
    v.retry_after_seconds = whole_seconds(b.tokens->wait_for(1, now));
    return v;
  }
  if (b.requests && !b.requests->try_take(1, now)) {
    v.result = AccessResult::RequestsLimited;
    v.retry_after_seconds = whole_seconds(b.requests->wait_for(1, now));
    return v;
  }
  v.result = AccessResult::Admitted;
  return v;
}

void TenantLimiter::charge(size_t tenant, const TokenUsage& usage, Clock::time_point now) {
  if (auto& t = buckets_[tenant].tokens) t->charge(static_cast<double>(usage.prompt_tokens + usage.completion_tokens), now);
}

std::string rate_limit_body(const Tenant& tenant, AccessResult which, int retry_after_seconds) {
  const bool requests = which == AccessResult::RequestsLimited;
  const std::string message =
      requests ? fmt::format("Rate limit reached for tenant '{}' on requests per second: limit {}. Try again in {} s.",
                             tenant.name, *tenant.limits.requests_per_second, retry_after_seconds)
               : fmt::format("Rate limit reached for tenant '{}' on tokens per minute: limit {}. Try again in {} s.",
                             tenant.name, *tenant.limits.tokens_per_minute, retry_after_seconds);
  return server::error_body(server::ApiError(429, message, "", "rate_limit_exceeded", requests ? "requests" : "tokens"));
}

}  // namespace nexus::gateway
