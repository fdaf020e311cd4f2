#include "server/websocket_handshake.h"

#include <boost/beast/http/rfc7230.hpp>

#include <string>
#include <string_view>

namespace nexus::server {
namespace {

namespace http = boost::beast::http;

HttpReply refuse(std::string message) {
  return error_reply(ApiError(400, "Invalid WebSocket handshake: " + std::move(message), "",
                              "invalid_websocket_handshake"));
}

std::string_view value(const http::request_header<>& req, http::field f) {
  const auto it = req.find(f);
  return it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

bool has_token(std::string_view list, const char* token) {
  return http::token_list{boost::beast::string_view(list.data(), list.size())}.exists(token);
}

// RFC 6455 4.1: the base64 encoding of a 16-byte nonce: 22 base64 digits and "==".
bool valid_key(std::string_view key) {
  if (key.size() != 24 || key.substr(22) != "==") return false;
  for (const char c : key.substr(0, 22))
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/'))
      return false;
  return true;
}

}  // namespace

std::optional<HttpReply> websocket_handshake_error(const http::request_header<>& req) {
  if (req.find(http::field::upgrade) == req.end()) {
    HttpReply r = error_reply(ApiError(426, "GET /v1/realtime is a WebSocket endpoint: send an Upgrade request.",
                                       "", "upgrade_required"));
    r.headers.emplace_back("Upgrade", "websocket");
    return r;
  }
  if (req.version() != 11) return refuse("the upgrade needs HTTP/1.1.");
  if (req.method() != http::verb::get) return refuse("the upgrade must be a GET request.");
  if (req.find(http::field::host) == req.end()) return refuse("the Host header is missing.");
  if (!has_token(value(req, http::field::connection), "upgrade"))
    return refuse("the Connection header must contain 'upgrade'.");
  if (!has_token(value(req, http::field::upgrade), "websocket"))
    return refuse("the Upgrade header must name 'websocket'.");
  if (req.find(http::field::sec_websocket_key) == req.end()) return refuse("Sec-WebSocket-Key is missing.");
  if (!valid_key(value(req, http::field::sec_websocket_key)))
    return refuse("Sec-WebSocket-Key must be the base64 encoding of 16 bytes.");
  if (req.find(http::field::sec_websocket_version) == req.end())
    return refuse("Sec-WebSocket-Version is missing.");
  if (value(req, http::field::sec_websocket_version) != "13") {
    HttpReply r = error_reply(ApiError(426, "WebSocket version '" +
                                                printable(value(req, http::field::sec_websocket_version)) +
                                                "' is not supported; this server speaks version 13.",
                                       "", "unsupported_websocket_version"));
    r.headers.emplace_back("Sec-WebSocket-Version", "13");
    return r;
  }
  return std::nullopt;
}

}  // namespace nexus::server
