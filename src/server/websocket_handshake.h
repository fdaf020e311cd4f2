// The opening handshake of GET /v1/realtime checked before the socket is
// handed to Beast's websocket::stream, so that every refusal is the API's
// JSON error body rather than Beast's plain-text 400.
//
// Source: RFC 6455 section 4.2.1 (the client's opening handshake) and 4.2.2
// item 4 / 4.4 (a version the server does not speak); RFC 9110 section
// 15.5.22 (426 carries Upgrade). The same checks as Beast 1.74's
// build_response (websocket/impl/accept.hpp), in the same order, so a request
// that passes here is one Beast accepts:
//   no Upgrade field at all                  426 upgrade_required (Upgrade: websocket)
//   HTTP/1.0, a method other than GET        400 invalid_websocket_handshake
//   no Host; Connection without "upgrade"    400 invalid_websocket_handshake
//   Upgrade without the "websocket" token    400 invalid_websocket_handshake
//   Sec-WebSocket-Key missing, or not the base64 of 16 bytes (24 characters,
//   "==" at the end)                         400 invalid_websocket_handshake
//   Sec-WebSocket-Version missing            400 invalid_websocket_handshake
//   Sec-WebSocket-Version other than 13      426 unsupported_websocket_version
//                                            (Sec-WebSocket-Version: 13)
#pragma once

#include <optional>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/api_router.h"

namespace nexus::server {

// nullopt when the request is a valid WebSocket opening handshake.
std::optional<HttpReply> websocket_handshake_error(const boost::beast::http::request_header<>& req);

}  // namespace nexus::server
