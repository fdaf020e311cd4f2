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
//
// Length limits (RFC 9112 section 3 / RFC 9110 section 15.5.15, 414 URI Too
// Long; 431 from RFC 6585 section 5):
//   - the request target: at most kMaxTargetBytes, else 414;
//   - the whole header (request line and fields): at most kMaxHeaderBytes,
//     else 431 - or 414 when the request line alone is what went over.
#pragma once

#include <boost/beast/http/fields.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace nexus::server {

constexpr size_t kMaxTargetBytes = 8 << 10;
// Room for a target at its limit and 8 KiB of fields (Beast's default).
constexpr size_t kMaxHeaderBytes = kMaxTargetBytes + (8 << 10);

// 414 uri_too_long when `target` is over kMaxTargetBytes.
std::optional<ApiError> request_target_error(std::string_view target);

// The header went over kMaxHeaderBytes (Beast's header_limit). `target`:
// the request target when Beast had parsed the request line ("" when not:
// the line itself was too long), `buffered` the unparsed bytes. 414 when the
// target is over kMaxTargetBytes or the unparsed request line (up to the
// first CRLF, or all of it) is longer than one with a target at the limit;
// else 431 headers_too_large.
ApiError header_too_large_error(std::string_view target, std::string_view buffered);

// A request target in absolute-form (`http://host:port/path?query`, RFC 9112
// section 3.2.2: a server MUST accept it, and then ignores Host) as the
// origin-form path and query the routes know (`/path?query`; `/` when the
// target has no path); nullopt for any other form (origin-form, `*`).
std::optional<std::string> origin_form(std::string_view target);

// nullopt when the header frames the request as HTTP/1.1 requires.
// `version`: 10 or 11 (Beast's encoding).
std::optional<ApiError> request_framing_error(const boost::beast::http::fields& headers, unsigned version);

}  // namespace nexus::server
