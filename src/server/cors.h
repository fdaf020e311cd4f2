// CorsPolicy: which browser origins may call the API (`nexus serve
// --cors-allow-origin ORIGIN`, repeatable, or `*`), and the headers that say
// so. Source: the Fetch standard's CORS protocol (fetch.spec.whatwg.org,
// section 3.2) and RFC 9110 section 9.3.7 (OPTIONS).
//
//   - A request whose Origin is allowed gets Access-Control-Allow-Origin
//     (the origin itself, or `*` when every origin is) and `Vary: Origin`
//     on every response, errors included.
//   - A preflight (OPTIONS with Origin and Access-Control-Request-Method)
//     from an allowed origin gets 204 with Access-Control-Allow-Origin,
//     -Methods (the path's methods), -Headers (those it asked for, else
//     Authorization and Content-Type) and -Max-Age (600 s); from another
//     origin a 403 JSON error (cors_origin_not_allowed).
//   - Without any allowed origin the policy is off: OPTIONS is a method the
//     routes do not have (405 with Allow), and no CORS header is ever sent.
// Origins are compared as sent (RFC 6454 serialisation: scheme://host[:port],
// lower-case), case-insensitively.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nexus::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class CorsPolicy {
 public:
  CorsPolicy() = default;
  explicit CorsPolicy(std::vector<std::string> allowed_origins);

  bool enabled() const { return any_ || !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request from `origin`
  // (the Origin header, "" when absent); nullopt when it is not allowed.
  std::optional<std::string> allow_origin(std::string_view origin) const;
  // The headers every response to a request from `origin` carries (none
  // when the origin is absent or not allowed).
  HeaderList response_headers(std::string_view origin) const;
  // The headers a successful preflight answer adds to response_headers()
  // (each field once on the wire); `methods` is the path's Allow value,
  // `request_headers` the Access-Control-Request-Headers value.
  HeaderList preflight_headers(std::string_view origin, std::string_view methods,
                               std::string_view request_headers) const;

  static constexpr int kMaxAgeSeconds = 600;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;  // lower-cased
};

}  // namespace nexus::server
