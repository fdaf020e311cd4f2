#include "server/api_key.h"

#include <cctype>

namespace nexus::server {

std::optional<std::string_view> bearer_token(std::string_view h) {
  while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
  constexpr std::string_view scheme = "bearer";
  if (h.size() <= scheme.size()) return std::nullopt;
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) != scheme[i]) return std::nullopt;
  if (h[scheme.size()] != ' ' && h[scheme.size()] != '\t') return std::nullopt;
  h.remove_prefix(scheme.size());
  while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
  if (h.empty()) return std::nullopt;
  return h;
}

bool same_key(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

ApiError invalid_api_key(bool presented) {
  return ApiError(401,
                  presented ? "Incorrect API key provided."
                            : "You didn't provide an API key. You need to provide your API key in an Authorization "
                              "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                  "", "invalid_api_key", "invalid_request_error");
}

bool open_without_key(std::string_view method, std::string_view path) {
  path = path.substr(0, path.find('?'));
  if (method == "OPTIONS") return true;
  if (method != "GET" && method != "HEAD") return false;
  return path == "/health" || path == "/metrics" || path == "/load";
}

}  // namespace nexus::server
