#include "util/json_depth.h"

#include <atomic>

#include <fmt/format.h>

namespace nexus {
namespace {
std::atomic<int> g_max_depth{kDefaultMaxJsonDepth};
}  // namespace

int max_json_depth() { return g_max_depth.load(std::memory_order_relaxed); }

void set_max_json_depth(int depth) {
  if (depth < 1 || depth > kMaxJsonDepthLimit)
    throw Error(fmt::format("the JSON nesting limit must be from 1 to {}, got {}", kMaxJsonDepthLimit, depth));
  g_max_depth.store(depth, std::memory_order_relaxed);
}

std::string json_too_deep_message(int limit) {
  return fmt::format("The JSON is nested more than {} levels deep (this server's limit, --max-json-depth).", limit);
}

JsonTooDeep::JsonTooDeep(int limit) : Error(json_too_deep_message(limit)), limit(limit) {}

}  // namespace nexus
