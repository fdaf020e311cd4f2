// dispatch_request: what HttpSession does with one whole request (header and
// body read, framing already checked): a ready reply, a generation to
// submit, or a WebSocket upgrade. Pure: no I/O, safe from any thread; the
// HTTP fuzz target (fuzz/fuzz_http.cpp) drives it as the session does.
//
//   HEAD      answered as GET with the same headers (Content-Length
//             included) and no body (RFC 9110 section 9.3.2); the session
//             leaves the body out.
//   OPTIONS   with a CORS policy (cors.h): a preflight from an allowed
//             origin gets 204 and the Access-Control-* headers, one from
//             another origin 403 cors_origin_not_allowed, an OPTIONS without
//             Origin 204 with Allow. Without a policy: 405 with Allow, as for
//             any method a path does not have.
//   /v1/realtime, /realtime
//             GET: the WebSocket handshake checks (websocket_handshake.h),
//             then Upgrade; any other method 405 with Allow: GET.
//   /v1/responses, /responses
//             GET with Upgrade: websocket: the handshake checks, then the
//             Responses API's WebSocket mode (responses/responses_ws_session.h);
//             everything else goes to the router (POST).
//   /v1/stats/stream, /stats/stream
//             GET: the live stats SSE stream (stats_stream.h); any other
//             method 405 with Allow: GET.
//   the rest  ApiRouter::route.
// Every response to a request from an allowed origin carries the CORS
// response headers (`cors`), errors included.
#pragma once

#include <variant>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/api_router.h"
#include "server/cors.h"

namespace nexus::server {

struct UpgradeToRealtime {};
struct UpgradeToResponses {};  // the Responses API's WebSocket mode
struct StreamStats {};

struct Dispatch {
  std::variant<HttpReply, PendingGeneration, UpgradeToRealtime, UpgradeToResponses, StreamStats> action;
  bool head = false;  // HEAD: send the reply's header only
  HeaderList cors;    // extra headers for every response to this request
};

Dispatch dispatch_request(const boost::beast::http::request<boost::beast::http::string_body>& req,
                          const ApiRouter& router, const CorsPolicy& cors);

// GET /v1/realtime (or /realtime), query string ignored.
bool is_realtime_target(std::string_view target);
// GET /v1/stats/stream (or /stats/stream), query string ignored.
bool is_stats_stream_target(std::string_view target);

}  // namespace nexus::server
