#include "server/api_key.h"

#include <cctype>

#include "assets/web_assets.h"
#include "server/routes.h"

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

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls f(token) for each comma-separated token; stops when f returns true.
template <class F>
bool any_token(std::string_view list, F f) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (f(trimmed(list.substr(0, comma)))) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::optional<std::string_view> presented_key(std::string_view authorization, std::string_view websocket_protocols,
                                              std::string_view x_api_key) {
  if (auto key = bearer_token(authorization)) return key;
  constexpr std::string_view prefix = "openai-insecure-api-key.";
  std::optional<std::string_view> key;
  any_token(websocket_protocols, [&](std::string_view t) {
    if (t.size() <= prefix.size() || !t.starts_with(prefix)) return false;
    key = t.substr(prefix.size());
    return true;
  });
  if (!key && !x_api_key.empty()) key = x_api_key;
  return key;
}

bool offers_subprotocol(std::string_view websocket_protocols, std::string_view name) {
  return any_token(websocket_protocols, [&](std::string_view t) { return t == name; });
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

ApiError invalid_api_key(bool presented, Protocol protocol) {
  const bool anthropic = protocol == Protocol::Anthropic;
  return ApiError(401,
                  presented  ? (anthropic ? "Invalid API key." : "Incorrect API key provided.")
                  : anthropic ? "Missing API key: send it in the x-api-key header."
                              : "You didn't provide an API key. You need to provide your API key in an Authorization "
                                "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                  "", "invalid_api_key", "invalid_request_error");
}

bool open_without_key(std::string_view method, std::string_view path) {
  path = target_path(path);
  if (method == "OPTIONS") return true;
  if (method != "GET" && method != "HEAD") return false;
  const Route* r = find_route(path);
  return r ? r->open : find_web_asset(path) != nullptr;
}

}  // namespace nexus::server
