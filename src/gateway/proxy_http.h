// Small HTTP helpers the proxy session's two halves share (internal).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>

#include "server/api_error.h"

namespace nexus::gateway {

// The OpenAI-style error body (server/api_error.h's shape).
inline std::string api_error_body(int status, const std::string& message, const std::string& code,
                                  const std::string& type = "server_error") {
  return server::error_body(server::ApiError(status, message, "", code, type));
}

// A logfmt value: as it is when it has no space, quote, backslash, '=' or
// control character, else quoted with \" and \\ escaped and control bytes
// as \xNN.
inline std::string logfmt_value(std::string_view v) {
  bool plain = !v.empty();
  for (unsigned char c : v) plain = plain && c > 0x20 && c != '"' && c != '\\' && c != '=' && c != 0x7f;
  if (plain) return std::string(v);
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

// Headers a CORS policy writes (server/cors.h): the gateway's own replace
// the replica's when --cors-allow-origin is given.
inline bool cors_field(boost::beast::http::field f) {
  using boost::beast::http::field;
  switch (f) {
    case field::access_control_allow_origin:
    case field::access_control_allow_methods:
    case field::access_control_allow_headers:
    case field::access_control_allow_credentials:
    case field::access_control_expose_headers:
    case field::access_control_max_age:
    case field::vary:
      return true;
    default:
      return false;
  }
}

// Whether the peer of a connection we are not reading from has closed or
// reset it (a non-blocking peek: EOF or an error; bytes it sent, such as a
// pipelined request or TLS records, leave them unread and mean it is there).
inline bool peer_closed(boost::asio::ip::tcp::socket& s) {
  char c;
  const ssize_t n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Whether a header travels through the gateway: not hop-by-hop (RFC 9110
// 7.6.1) and not one the gateway sets itself.
inline bool end_to_end(boost::beast::http::field f) {
  using boost::beast::http::field;
  switch (f) {
    case field::connection:
    case field::keep_alive:
    case field::proxy_connection:
    case field::te:
    case field::trailer:
    case field::transfer_encoding:
    case field::upgrade:
    case field::host:
    case field::content_length:
    case field::expect:
      return false;
    default:
      return true;
  }
}

// Whether a request header is the client's credential (Authorization, or
// Anthropic's x-api-key): the gateway checks it itself and, where it holds
// its own key for the replicas or checks tenants' keys, does not pass it on.
template <class Field>
bool client_credential(const Field& f) {
  return f.name() == boost::beast::http::field::authorization || boost::beast::iequals(f.name_string(), "x-api-key");
}

}  // namespace nexus::gateway
