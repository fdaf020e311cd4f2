#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include "util/json_depth.h"

namespace nexus::server {

std::string printable(std::string_view client_text) {
  std::string out;
  out.reserve(client_text.size());
  for (const char ch : client_text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string error_body(const ApiError& e) {
  nlohmann::json err = {
      {"message", e.message},
      {"type", e.type},
      {"param", e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param)},
      {"code", e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code)},
  };
  // Messages may quote user input; replace rather than throw on bad UTF-8.
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError nesting_too_deep(int limit, std::string param) {
  return bad_request(json_too_deep_message(limit), std::move(param), "nesting_too_deep");
}

}  // namespace nexus::server
