// ApiError: an HTTP error in the OpenAI API's shape.
//
// Every rejected request gets the body OpenAI's API uses (API reference,
// "Error codes"):
//   {"error":{"message":"...","type":"invalid_request_error","param":"...","code":...}}
// `param` names the offending request field (null when none) and `code` is a
// machine-readable reason (null when none), e.g. "context_length_exceeded".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace nexus::server {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(message),
        status(status),
        message(std::move(message)),
        param(std::move(param)),
        code(std::move(code)),
        type(std::move(type)) {}

  int status;           // HTTP status: 400, 404, 405, 413, 429, 500, ...
  std::string message;  // whole, NUL bytes included (what() stops at the first)
  std::string param;  // "" = null
  std::string code;   // "" = null
  std::string type;   // "invalid_request_error", "not_found_error", "server_error", ...
};

// Client text quoted in an error message: control characters (NUL, newline,
// ESC, DEL, ...) as \xNN, so a message never carries them raw and is never
// cut short by one. Everything else, UTF-8 included, is kept.
std::string printable(std::string_view client_text);

// The JSON body for an error (no trailing newline).
std::string error_body(const ApiError& e);

// Shorthand for the most common case: 400 invalid_request_error.
inline ApiError bad_request(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError(400, std::move(message), std::move(param), std::move(code));
}

// 400 `nesting_too_deep`: a JSON text nested past the limit (util/json_depth.h,
// --max-json-depth), naming it; `param` is the field whose text it was ("" =
// the body itself).
ApiError nesting_too_deep(int limit, std::string param = {});

}  // namespace nexus::server
