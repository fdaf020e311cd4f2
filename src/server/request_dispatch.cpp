#include "server/request_dispatch.h"

#include <string>
#include <string_view>

#include <boost/beast/websocket/rfc6455.hpp>

#include "server/crash_fault.h"
#include "server/routes.h"
#include "server/websocket_handshake.h"

namespace nexus::server {
namespace {

namespace http = boost::beast::http;

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

std::string_view field(const http::request<http::string_body>& req, http::field f) {
  const auto it = req.find(f);
  return it == req.end() ? std::string_view() : sv(it->value());
}

HttpReply no_content(HeaderList headers) {
  HttpReply r{204, "", std::move(headers)};
  return r;
}

// OPTIONS under a CORS policy, on a path whose methods are `methods`.
HttpReply options_reply(const http::request<http::string_body>& req, const CorsPolicy& cors,
                        const std::string& methods) {
  const std::string_view origin = field(req, http::field::origin);
  const std::string allow = methods + ", OPTIONS";
  if (origin.empty()) return no_content({{"Allow", allow}});
  if (!cors.allow_origin(origin))
    return error_reply(ApiError(403, "Origin '" + printable(origin) +
                                         "' is not allowed (nexus serve --cors-allow-origin).",
                                "", "cors_origin_not_allowed"));
  if (req.find(http::field::access_control_request_method) == req.end())
    return no_content({{"Allow", allow}});  // not a preflight: the path's methods
  return no_content(cors.preflight_headers(origin, allow, field(req, http::field::access_control_request_headers)));
}

}  // namespace

bool is_realtime_target(std::string_view target) {
  const Route* r = find_route(target);
  return r && r->id == RouteId::Realtime;
}

bool is_stats_stream_target(std::string_view target) {
  const Route* r = find_route(target);
  return r && r->id == RouteId::StatsStream;
}

Dispatch dispatch_request(const http::request<http::string_body>& req, const ApiRouter& router,
                          const CorsPolicy& cors) {
  Dispatch d;
  d.cors = cors.response_headers(field(req, http::field::origin));
  const std::string_view method = sv(req.method_string());
  const std::string_view target = sv(req.target());
  const bool options = req.method() == http::verb::options && cors.enabled();
  if (is_realtime_target(target)) {
    if (req.method() == http::verb::get) {
      if (std::optional<HttpReply> bad = websocket_handshake_error(req)) d.action = std::move(*bad);
      else d.action = UpgradeToRealtime{};
    } else if (options) {
      d.action = options_reply(req, cors, "GET");
    } else {
      d.action = ApiRouter::method_not_allowed(method, target.substr(0, target.find('?')),
                                               cors.enabled() ? "GET, OPTIONS" : "GET");
    }
    return d;
  }
  if (req.method() == http::verb::get && boost::beast::websocket::is_upgrade(req)) {
    const Route* route = find_route(target);
    if (route && route->id == RouteId::Responses) {
      if (std::optional<HttpReply> bad = websocket_handshake_error(req)) d.action = std::move(*bad);
      else d.action = UpgradeToResponses{};
      return d;
    }
  }
  if (is_stats_stream_target(target)) {
    if (req.method() == http::verb::get) d.action = StreamStats{};
    else if (options) d.action = options_reply(req, cors, "GET");
    else d.action = ApiRouter::method_not_allowed(method, target.substr(0, target.find('?')),
                                                  cors.enabled() ? "GET, OPTIONS" : "GET");
    return d;
  }
  if (options) {
    if (const char* methods = ApiRouter::allowed_methods(target)) {
      d.action = options_reply(req, cors, methods);
      return d;
    }
  }
  d.head = req.method() == http::verb::head;
  crash_if_faulty(req.body());  // (tests only: crash_fault.h)
  RouteResult r = router.route(method, target, req.body());
  if (auto* reply = std::get_if<HttpReply>(&r)) {
    if (reply->status == 405 && cors.enabled())
      for (auto& [name, value] : reply->headers)
        if (name == "Allow") value += ", OPTIONS";
    d.action = std::move(*reply);
  } else {
    d.action = std::move(std::get<PendingGeneration>(r));
  }
  return d;
}

}  // namespace nexus::server
