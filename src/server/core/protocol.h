// Which protocol a request path speaks, and errors in that protocol's shape.
//
//   OpenAI     every path but the ones below (API reference, "Error codes"):
//              {"error": {"message", "type", "param", "code"}} (api_error.h)
//   Anthropic  /v1/messages, /v1/messages/count_tokens (Anthropic's API
//              reference, "Errors"): {"type": "error", "error": {"type",
//              "message"}}, the type by HTTP status: 400
//              invalid_request_error, 401 authentication_error, 403
//              permission_error, 404 not_found_error, 413
//              request_too_large, 429 rate_limit_error, 503/529
//              overloaded_error, other 5xx api_error. The OpenAI `code` and
//              `param` have no place there; the message keeps naming the field.
#pragma once

#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/http_reply.h"

namespace nexus::server {

enum class Protocol { OpenAI, Anthropic };

// The protocol of a request target (its route's, server/routes.h; OpenAI
// for a path without one).
Protocol protocol_of(std::string_view target);

std::string error_body(Protocol p, const ApiError& e);
HttpReply error_reply(Protocol p, const ApiError& e);

// Anthropic's error `type` for an HTTP status (as listed above).
const char* anthropic_error_type(int status);

}  // namespace nexus::server
