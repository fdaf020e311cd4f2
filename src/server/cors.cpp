#include "server/cors.h"

#include <algorithm>

namespace nexus::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return out;
}

// A header value sent back must not let client bytes end the header line.
bool safe_header_value(std::string_view v) {
  return std::none_of(v.begin(), v.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 ? c != '\t' : u == 0x7f;
  });
}

}  // namespace

CorsPolicy::CorsPolicy(std::vector<std::string> allowed_origins) {
  for (const std::string& o : allowed_origins) {
    if (o == "*") any_ = true;
    else origins_.push_back(lower(o));
  }
}

std::optional<std::string> CorsPolicy::allow_origin(std::string_view origin) const {
  if (origin.empty() || !enabled()) return std::nullopt;
  if (any_) return std::string("*");
  if (!safe_header_value(origin)) return std::nullopt;
  if (std::find(origins_.begin(), origins_.end(), lower(origin)) == origins_.end()) return std::nullopt;
  return std::string(origin);
}

HeaderList CorsPolicy::response_headers(std::string_view origin) const {
  HeaderList h;
  if (std::optional<std::string> allow = allow_origin(origin)) {
    h.emplace_back("Access-Control-Allow-Origin", *allow);
    if (!any_) h.emplace_back("Vary", "Origin");
  }
  return h;
}

HeaderList CorsPolicy::preflight_headers(std::string_view origin, std::string_view methods,
                                         std::string_view request_headers) const {
  // Access-Control-Allow-Origin and Vary are response_headers(), which every
  // response carries (the session adds them): not repeated here.
  HeaderList h;
  if (!allow_origin(origin)) return h;
  h.emplace_back("Access-Control-Allow-Methods", std::string(methods));
  h.emplace_back("Access-Control-Allow-Headers", !request_headers.empty() && safe_header_value(request_headers)
                                                     ? std::string(request_headers)
                                                     : std::string("Authorization, Content-Type"));
  h.emplace_back("Access-Control-Max-Age", std::to_string(kMaxAgeSeconds));
  return h;
}

}  // namespace nexus::server
