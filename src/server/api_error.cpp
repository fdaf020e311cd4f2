#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace nexus::server {

std::string error_body(const ApiError& e) {
  nlohmann::json err = {
      {"message", e.what()},
      {"type", e.type},
      {"param", e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param)},
      {"code", e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code)},
  };
  // Messages may quote user input; replace rather than throw on bad UTF-8.
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace nexus::server
