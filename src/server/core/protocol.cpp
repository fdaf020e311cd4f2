#include "server/core/protocol.h"

#include <nlohmann/json.hpp>

#include "server/routes.h"

namespace nexus::server {

Protocol protocol_of(std::string_view target) {
  const Route* r = find_route(target);
  return r ? r->protocol : Protocol::OpenAI;
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
  }
  return status >= 500 ? "api_error" : "invalid_request_error";
}

std::string error_body(Protocol p, const ApiError& e) {
  if (p == Protocol::OpenAI) return error_body(e);
  const nlohmann::json j = {{"type", "error"},
                            {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpReply error_reply(Protocol p, const ApiError& e) { return HttpReply{e.status, error_body(p, e), {}}; }

}  // namespace nexus::server
