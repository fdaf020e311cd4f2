// A generation that ended without an answer, as the ApiError every protocol
// renders in its own shape:
//   the request's own fault (GenerationEvent::error_code, e.g.
//   grammar_too_complex)  400 invalid_request_error, code = error_code
//   cancelled (FinishReason::Cancelled)  499-like: 400 code "cancelled"
//   anything else (a server bug)  500 server_error
#pragma once

#include "engine/engine.h"
#include "server/api_error.h"

namespace nexus::server {

inline ApiError generation_error(const GenerationEvent& ev) {
  if (ev.finish == FinishReason::Cancelled)
    return ApiError(400, "The response was cancelled.", "", "cancelled");
  if (!ev.error_code.empty()) return bad_request("The request cannot be followed: " + ev.error, "", ev.error_code);
  return ApiError(500, "generation failed: " + ev.error, "", "", "server_error");
}

}  // namespace nexus::server
