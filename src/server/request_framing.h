// RFC 9112 request framing checks made on a request's header, before any of
// its body is read: what would let one client's bytes be read as another
// request (request smuggling) or be framed differently by a proxy in front.
//
// Source: RFC 9112 (HTTP/1.1), section 3.2 (Host) and section 6 (message
// body: 6.1 Transfer-Encoding, 6.3 message body length).
//   - Transfer-Encoding whose final coding is not "chunked": 400, and the
//     connection closes (the body length cannot be determined; 6.3 item 4).
//   - "chunked" more than once, an empty coding list: 400.
//   - Any coding before the final "chunked" (gzip, deflate, ...): 501, since
//     Nexus decodes none of them (RFC 9110 section 15.6.2).
//   - Both Transfer-Encoding and Content-Length: 400 (6.1: a server may
//     reject it, and must close; both present is the classic smuggling
//     vector).
//   - An HTTP/1.1 request without a Host field, or with more than one: 400
//     (3.2: "MUST respond with a 400").
// The caller answers with the error and closes the connection.
#pragma once

#include <boost/beast/http/fields.hpp>

#include <optional>

#include "server/api_error.h"

namespace nexus::server {

// nullopt when the header frames the request as HTTP/1.1 requires.
// `version`: 10 or 11 (Beast's encoding).
std::optional<ApiError> request_framing_error(const boost::beast::http::fields& headers, unsigned version);

}  // namespace nexus::server
