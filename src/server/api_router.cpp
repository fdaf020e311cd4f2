#include "server/api_router.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "assets/web_assets.h"
#include "server/choices.h"
#include "server/embeddings.h"
#include "server/prompt_builder.h"
#include "server/tokenize_endpoints.h"
#include "server/tool_calls/request.h"

namespace nexus::server {

using nlohmann::json;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view strip_query(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
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
  const std::string_view path = strip_query(target);
  const std::string_view p = strip_v1(path);
  if (p == "/completions" || p == "/chat/completions" || p == "/embeddings" || path == "/tokenize" ||
      path == "/detokenize")
    return "POST";
  if (p == "/models" || p.starts_with("/models/") || path == "/health" || path == "/metrics" || path == "/load")
    return "GET, HEAD";
  if (find_web_asset(path)) return "GET, HEAD";
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
  const std::string_view path = strip_query(target);
  const std::string_view p = strip_v1(path);
  const char* allow = allowed_methods(path);
  if (!allow)
    return error_reply(ApiError(404, "Unknown path: " + printable(path), "", "not_found", "not_found_error"));
  const bool get = method == "GET" || method == "HEAD";
  if (std::string_view(allow) == "POST" ? method != "POST" : !get) return method_not_allowed(method, path, allow);
  if (p == "/completions" || p == "/chat/completions") {
    return completion(p == "/completions" ? Endpoint::Completions : Endpoint::ChatCompletions, body);
  }
  if (p == "/embeddings") return embeddings_reply(backend_, body);
  if (path == "/tokenize") return tokenize_reply(backend_, body);
  if (path == "/detokenize") return detokenize_reply(backend_, body);
  if (p == "/models" || p.starts_with("/models/")) {
    json model = {{"id", backend_.model_id()}, {"object", "model"}, {"created", created_},
                  {"owned_by", "nexus"}, {"meta", {{"n_ctx", backend_.n_ctx()}, {"n_vocab", backend_.n_vocab()}}}};
    if (p == "/models") return HttpReply{200, json{{"object", "list"}, {"data", json::array({model})}}.dump(), {}};
    // GET /v1/models/{id} (the SDKs' models.retrieve); the rest of the path
    // is the id, so an alias with a '/' in it works too.
    const std::string id(p.substr(8));
    if (id == backend_.model_id()) return HttpReply{200, model.dump(), {}};
    return error_reply(ApiError(404, "The model '" + printable(id) + "' does not exist; this server serves '" +
                                         backend_.model_id() + "'.",
                                "model", "model_not_found"));
  }
  if (const WebAsset* asset = find_web_asset(path)) return web_asset_reply(*asset);
  if (path == "/health") return HttpReply{200, R"({"status":"ok"})", {}};
  if (path == "/load") {
    const LoadReport l = backend_.load();
    const double util = l.kv_total_blocks > 0 ? static_cast<double>(l.kv_used_blocks) / l.kv_total_blocks : 0.0;
    return HttpReply{200, json{{"running", l.running}, {"waiting", l.waiting}, {"kv_used_blocks", l.kv_used_blocks},
                               {"kv_total_blocks", l.kv_total_blocks}, {"kv_utilization", util},
                               {"draining", draining_ && draining_->load(std::memory_order_relaxed)}}
                              .dump(),
                     {}};
  }
  return HttpReply{200, backend_.metrics_text() + (server_metrics_ ? server_metrics_() : std::string()), {},
                   "text/plain; version=0.0.4; charset=utf-8"};
}

RouteResult ApiRouter::completion(Endpoint endpoint, std::string_view body) const {
  try {
    ApiRequest req = parse_api_request(endpoint, body, max_request_priority_);
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
  } catch (const ApiError& e) {
    return error_reply(e);
  } catch (const std::exception& e) {
    // e.g. a tokenizer failure: the request was fine, the server was not.
    return error_reply(ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
  }
}

}  // namespace nexus::server
