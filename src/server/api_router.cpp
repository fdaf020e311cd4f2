#include "server/api_router.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "assets/web_assets.h"
#include "server/choices.h"
#include "server/embeddings.h"
#include "server/anthropic/messages_formatter.h"
#include "server/anthropic/messages_request.h"
#include "server/core/protocol.h"
#include "server/prompt_builder.h"
#include "server/responses/responses_formatter.h"
#include "server/responses/responses_request.h"
#include "server/responses/stored_responses.h"
#include "server/routes.h"
#include "server/tokenize_endpoints.h"
#include "server/tool_calls/request.h"

namespace nexus::server {

using nlohmann::json;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view strip_v1(std::string_view path) {
  return path.starts_with("/v1/") ? path.substr(3) : path;
}

// The web chat's files (assets/web_assets.h). The policy keeps every request
// of the page on its own origin: no CDN, no third-party connection.
HttpReply web_asset_reply(const WebAsset& a) {
  return HttpReply{200,
                   std::string(a.body),
                   {{"Cache-Control", "no-cache"},
                    {"X-Content-Type-Options", "nosniff"},
                    {"Content-Security-Policy",
                     "default-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                     "form-action 'none'; frame-ancestors 'none'"}},
                   std::string(a.content_type)};
}

// Whether `method` is one of the comma-separated `allow` list.
bool method_listed(std::string_view allow, std::string_view method) {
  while (!allow.empty()) {
    const size_t comma = allow.find(',');
    std::string_view m = allow.substr(0, comma);
    while (m.starts_with(' ')) m.remove_prefix(1);
    if (m == method) return true;
    if (comma == std::string_view::npos) break;
    allow.remove_prefix(comma + 1);
  }
  return false;
}

// An ApiError as the protocol's reply; any other exception (e.g. a
// tokenizer failure: the request was fine, the server was not) a 500.
template <typename F>
RouteResult guarded(Protocol protocol, F&& f) {
  try {
    return f();
  } catch (const ApiError& e) {
    return error_reply(protocol, e);
  } catch (const std::exception& e) {
    return error_reply(protocol, ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
  }
}

}  // namespace

HttpReply error_reply(const ApiError& e) { return HttpReply{e.status, error_body(e), {}}; }

HttpReply ApiRouter::method_not_allowed(std::string_view method, std::string_view path, std::string_view allow) {
  HttpReply r = error_reply(ApiError(405, "Method " + printable(method) + " is not allowed on " + printable(path) +
                                              "; use " + std::string(allow) + ".",
                                     "", "method_not_allowed"));
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

const char* ApiRouter::allowed_methods(std::string_view target) {
  if (const Route* r = find_route(target)) return r->methods;
  if (find_web_asset(target_path(target))) return "GET, HEAD";
  return nullptr;
}

ApiRouter::ApiRouter(Backend& backend) : backend_(backend), created_(unix_now()) {}

ApiError ApiRouter::queue_full_error() {
  return ApiError(429, "The server is busy: the request queue is full. Retry shortly.", "", "queue_full",
                  "rate_limit_error");
}

HttpReply ApiRouter::queue_full() {
  HttpReply r = error_reply(queue_full_error());
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

RouteResult ApiRouter::route(std::string_view method, std::string_view target, std::string_view body) const {
  const std::string_view path = target_path(target);
  const std::string_view p = strip_v1(path);
  const Route* route = find_route(path);
  const WebAsset* asset = route ? nullptr : find_web_asset(path);
  if (!route && !asset)
    return error_reply(ApiError(404, "Unknown path: " + printable(path), "", "not_found", "not_found_error"));
  const char* allow = route ? route->methods : "GET, HEAD";
  if (!method_listed(allow, method == "HEAD" ? "GET" : method)) {
    HttpReply r = method_not_allowed(method, path, allow);
    if (!route || route->protocol == Protocol::OpenAI) return r;
    HttpReply a = error_reply(route->protocol, ApiError(405, "Method " + printable(method) + " is not allowed on " +
                                                                 printable(path) + "; use " + allow + "."));
    a.headers = std::move(r.headers);
    return a;
  }
  if (asset) return web_asset_reply(*asset);
  switch (route->id) {
    case RouteId::Completions: return completion(Endpoint::Completions, body);
    case RouteId::ChatCompletions: return completion(Endpoint::ChatCompletions, body);
    case RouteId::Responses: return responses(body);
    case RouteId::Messages: return messages(body);
    case RouteId::CountTokens: return count_tokens(body);
    case RouteId::StoredResponse:
    case RouteId::ResponseCancel:
    case RouteId::ResponseInputItems: {
      const size_t q = target.find('?');
      return stored_response(method, p.substr(std::string_view("/responses/").size()),
                             q == std::string_view::npos ? std::string_view() : target.substr(q + 1));
    }
    case RouteId::Embeddings: return embeddings_reply(backend_, body);
    case RouteId::Tokenize: return tokenize_reply(backend_, body);
    case RouteId::Detokenize: return detokenize_reply(backend_, body);
    case RouteId::Models:
    case RouteId::Model: {
      json model = {{"id", backend_.model_id()}, {"object", "model"}, {"created", created_},
                    {"owned_by", "nexus"}, {"meta", {{"n_ctx", backend_.n_ctx()}, {"n_vocab", backend_.n_vocab()}}}};
      if (route->id == RouteId::Models)
        return HttpReply{200, json{{"object", "list"}, {"data", json::array({model})}}.dump(), {}};
      // GET /v1/models/{id} (the SDKs' models.retrieve); the rest of the path
      // is the id, so an alias with a '/' in it works too.
      const std::string id(p.substr(8));
      if (id == backend_.model_id()) return HttpReply{200, model.dump(), {}};
      return error_reply(ApiError(404, "The model '" + printable(id) + "' does not exist; this server serves '" +
                                           backend_.model_id() + "'.",
                                  "model", "model_not_found"));
    }
    case RouteId::Health: return HttpReply{200, R"({"status":"ok"})", {}};
    case RouteId::Load: {
      const LoadReport l = backend_.load();
      const double util = l.kv_total_blocks > 0 ? static_cast<double>(l.kv_used_blocks) / l.kv_total_blocks : 0.0;
      return HttpReply{200, json{{"running", l.running}, {"waiting", l.waiting}, {"kv_used_blocks", l.kv_used_blocks},
                                 {"kv_total_blocks", l.kv_total_blocks}, {"kv_utilization", util},
                                 {"draining", draining_ && draining_->load(std::memory_order_relaxed)}}
                                .dump(),
                       {}};
    }
    case RouteId::Metrics:
      return HttpReply{200, backend_.metrics_text() + (server_metrics_ ? server_metrics_() : std::string()), {},
                       "text/plain; version=0.0.4; charset=utf-8"};
    case RouteId::Realtime:
    case RouteId::StatsStream:
      break;  // dispatch_request() serves them before the router
  }
  return error_reply(ApiError(400, printable(path) + " is served as a stream (WebSocket or SSE), not here.", "",
                              "invalid_request_error"));
}

RouteResult ApiRouter::completion(Endpoint endpoint, std::string_view body) const {
  return guarded(Protocol::OpenAI, [&]() -> RouteResult {
    ConversationRequest req = parse_openai_request(endpoint, body, max_request_priority_);
    PendingGeneration g;
    g.request = build_generation(req, backend_);
    ResponseMeta meta;
    meta.endpoint = endpoint;
    meta.stream = req.stream;
    meta.include_usage = req.stream && req.include_usage;
    meta.model = backend_.model_id();
    meta.id = make_response_id(endpoint);
    meta.created = unix_now();
    meta.logprobs = g.request.sampling.logprobs;
    meta.tools = tool_calls::response_setup(req.tool_use, backend_);
    meta.echo_text = echo_text(req, backend_);
    g.more = more_choices(g.request, req.n);
    g.formatter = std::make_unique<ChoicesFormatter>(std::move(meta), req.n);
    return g;
  });
}

RouteResult ApiRouter::responses(std::string_view body) const {
  return guarded(Protocol::OpenAI, [&]() -> RouteResult {
    ResponsesParseOptions o;
    o.max_priority = max_request_priority_;
    o.strict_tools = strict_tools_;
    o.n_ctx = backend_.n_ctx();
    const ResponsesRequest req = parse_responses_request(body, *responses_, o);
    PendingGeneration g;
    g.request = build_generation(req.conversation, backend_);
    g.formatter = std::make_unique<ResponsesFormatter>(
        req, backend_.model_id(), tool_calls::response_setup(req.conversation.tool_use, backend_), responses_.get());
    return g;
  });
}

// Anthropic answers a model it does not serve with 404 not_found_error
// (OpenAI's paths keep their 400 model_not_found).
void ApiRouter::check_model(const std::string& model) const {
  if (model != backend_.model_id())
    throw ApiError(404, "model: '" + printable(model) + "' is not served here; this server serves '" +
                            backend_.model_id() + "'.", "model", "model_not_found", "not_found_error");
}

RouteResult ApiRouter::messages(std::string_view body) const {
  return guarded(Protocol::Anthropic, [&]() -> RouteResult {
    MessagesParseOptions o;
    o.max_priority = max_request_priority_;
    o.strict_tools = strict_tools_;
    const ConversationRequest req = parse_messages_request(body, o);
    check_model(req.model);
    PendingGeneration g;
    g.request = build_generation(req, backend_);
    g.formatter = std::make_unique<MessagesFormatter>(req.stream, backend_.model_id(),
                                                      static_cast<int64_t>(g.request.prompt.size()),
                                                      tool_calls::response_setup(req.tool_use, backend_));
    return g;
  });
}

// The prompt's tokens as POST /v1/messages would render them: {"input_tokens"}.
RouteResult ApiRouter::count_tokens(std::string_view body) const {
  return guarded(Protocol::Anthropic, [&]() -> RouteResult {
    MessagesParseOptions o;
    o.max_priority = max_request_priority_;
    o.strict_tools = strict_tools_;
    o.count_tokens = true;
    const ConversationRequest req = parse_messages_request(body, o);
    check_model(req.model);
    return HttpReply{200, json{{"input_tokens", prompt_tokens(req, backend_).size()}}.dump(), {}};
  });
}

// GET/DELETE /v1/responses/{id}, GET .../input_items, POST .../cancel.
HttpReply ApiRouter::stored_response(std::string_view method, std::string_view rest, std::string_view query) const {
  return stored_response_reply(*responses_, method, rest, query);
}

}  // namespace nexus::server
