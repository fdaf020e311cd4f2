// The gateway's API keys (`nexus gateway --api-keys FILE`, docs/gateway.md
// "API keys and quotas"): each key belongs to a tenant, and each tenant has
// its own limits. Several keys may name one tenant (key rotation): they
// share its limits, which must then be written the same on each.
//
// The file is JSON or plain lines (the first non-blank character decides:
// `{` or `[` is JSON):
//
//   {"keys": [{"key": "sk-team-a-1", "tenant": "team-a",
//              "requests_per_second": 5, "tokens_per_minute": 20000,
//              "max_priority": "default"}, ...]}
//   (or just the array)
//
//   # KEY  TENANT  [REQUESTS_PER_SECOND  [TOKENS_PER_MINUTE  [MAX_PRIORITY]]]
//   sk-team-a-1  team-a  5  20000  default
//   sk-team-b-1  team-b  -  100000
//
// A limit left out, `-` or (JSON) null is "no limit"; a given rate limit is
// a positive number; max_priority is the highest `priority` the tenant's
// requests may ask for (server/request_priority.h: interactive, default or
// an integer in [0, 1000]; JSON: that string or integer), checked by the
// gateway before a request reaches a replica (priority_refusal); the
// replica's own --max-request-priority applies in any case. Keys are one
// word of printable ASCII; a tenant name is [A-Za-z0-9_.-]+ (it is a
// metrics label). Unknown JSON fields, a key listed twice, an empty file:
// errors (nexus::Error naming the file and the line or entry).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "server/api_error.h"

namespace nexus::gateway {

struct TenantLimits {
  std::optional<double> requests_per_second;  // nullopt = no limit
  std::optional<double> tokens_per_minute;    // prompt + completion tokens
  std::optional<int32_t> max_priority;        // the highest `priority` a request may ask for
  bool operator==(const TenantLimits&) const = default;
};

struct Tenant {
  std::string name;
  TenantLimits limits;
};

struct ApiKeyTable {
  std::vector<Tenant> tenants;                  // in the file's order of first mention
  std::unordered_map<std::string, size_t> keys;  // key -> index in tenants

  // The tenant of `key`, or nullopt (an unknown key).
  std::optional<size_t> find(std::string_view key) const;
};

// `source` names the text in error messages (the file's path).
ApiKeyTable parse_api_keys(std::string_view text, const std::string& source);
ApiKeyTable load_api_keys(const std::string& path);  // reads, then parse_api_keys

// For a completions or chat request body of `tenant`: the 400 to answer
// when its `priority` is above the tenant's max_priority (OpenAI's shape,
// code priority_above_cap), else nullopt -- no cap, no priority, or a body
// or value the replica refuses itself (not JSON, not a class name or an
// integer in range: relayed, so the replica's error names what is wrong).
// `body`: the request body as parsed (a discarded value when not JSON).
std::optional<server::ApiError> priority_refusal(const Tenant& tenant, const nlohmann::ordered_json& body);

}  // namespace nexus::gateway
