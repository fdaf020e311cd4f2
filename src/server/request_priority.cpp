#include "server/request_priority.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace nexus::server {

static_assert(kDefaultMaxRequestPriority == kPriorityInteractive);

std::optional<int32_t> priority_class(std::string_view name) {
  if (name == "interactive") return kPriorityInteractive;
  if (name == "default") return kPriorityDefault;
  if (name == "batch") return kPriorityBatch;
  return std::nullopt;
}

std::optional<int32_t> parse_priority_cap(std::string_view text) {
  std::optional<int32_t> cap = priority_class(text);
  if (!cap) {
    int32_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) cap = v;
  }
  if (!cap || *cap < kPriorityDefault || *cap > kPriorityMax) return std::nullopt;
  return cap;
}

std::optional<int32_t> priority_value(const nlohmann::json& value) {
  if (value.is_string()) return priority_class(value.get_ref<const std::string&>());
  if (!value.is_number()) return std::nullopt;
  const double d = value.get<double>();
  if (d != std::floor(d) || d < kPriorityMin || d > kPriorityMax) return std::nullopt;
  return static_cast<int32_t>(d);
}

std::string priority_name(int32_t priority) {
  for (const char* name : {"interactive", "default", "batch"})
    if (priority_class(name) == priority) return fmt::format("{} ({})", name, priority);
  return std::to_string(priority);
}

ApiError priority_above_cap(int32_t priority, int32_t cap, std::string_view whose) {
  return bad_request(fmt::format("Invalid 'priority': {} is above the highest priority {} allows, {}.",
                                 priority_name(priority), whose, priority_name(cap)),
                     "priority", "priority_above_cap");
}

}  // namespace nexus::server
