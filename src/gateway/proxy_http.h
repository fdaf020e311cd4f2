// Small HTTP helpers the proxy session's two halves share (internal).
#pragma once

#include <string>
#include <string_view>

#include <boost/beast/http/field.hpp>

#include "server/api_error.h"

namespace nexus::gateway {

// The OpenAI-style error body (server/api_error.h's shape).
inline std::string api_error_body(int status, const std::string& message, const std::string& code,
                                  const std::string& type = "server_error") {
  return server::error_body(server::ApiError(status, message, "", code, type));
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

}  // namespace nexus::gateway
