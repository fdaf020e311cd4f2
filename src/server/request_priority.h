// The `priority` request field (a Nexus extension; docs/server.md
// "Priority") and its cap. A priority is a class -- "interactive" (10),
// "default" (0), "batch" (-10) -- or an integer in [-1000, 1000]
// (engine/engine.h's kPriority* constants; higher is scheduled first, and a
// wait is bounded whatever the priorities: engine/scheduler.h, Aging).
//
// Priority is a privilege: a request may ask for at most the cap in force,
// `nexus serve --max-request-priority` (default interactive, so no integer
// outranks interactive traffic) and, behind `nexus gateway --api-keys`, its
// tenant's `max_priority` (gateway/api_keys.h). A cap is at least default
// (0): a request that names no priority runs at default and is never
// refused for it. Above the cap: 400 invalid_request_error, param
// `priority`, code `priority_above_cap`, the message naming the cap.
//
// Needs no engine header (the gateway uses it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "server/api_error.h"

namespace nexus::server {

inline constexpr int32_t kDefaultMaxRequestPriority = 10;  // interactive (checked against engine.h)

// "interactive", "default", "batch" -> the class's priority; nullopt for any other text.
std::optional<int32_t> priority_class(std::string_view name);

// A cap as an option or the keys file writes it: a class name or a decimal
// integer, within [0 (default), 1000]. nullopt for anything else.
std::optional<int32_t> parse_priority_cap(std::string_view text);
inline constexpr const char* kPriorityCapValues = "interactive, default or an integer in [0, 1000]";

// A request's `priority` value as the server accepts it -- a class name, or
// an integral number in [-1000, 1000] -- or nullopt for anything else (which
// the server refuses with its own error, openai_request.h).
std::optional<int32_t> priority_value(const nlohmann::json& value);

// "interactive (10)" for a class's priority, else the integer ("1000").
std::string priority_name(int32_t priority);

// The 400 for `priority` above `cap`; `whose` is whose cap it is, as the
// message says it: "this server", "this API key".
ApiError priority_above_cap(int32_t priority, int32_t cap, std::string_view whose);

}  // namespace nexus::server
