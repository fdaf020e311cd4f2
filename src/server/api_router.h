// ApiRouter: method + path + body -> a ready reply, or a generation to run.
//
// Routes (a query string is ignored; the paths also answer without "/v1"):
//   POST /v1/completions          generation (prompt)
//   POST /v1/chat/completions     generation (messages)
//   POST /v1/responses            generation (responses/responses_request.h)
//   GET, DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items,
//   POST /v1/responses/{id}/cancel
//                                 the response store (responses/stored_responses.h)
//   POST /v1/messages             generation (anthropic/messages_request.h)
//   POST /v1/messages/count_tokens {"input_tokens"} of the same request
//   POST /v1/embeddings           embeddings (embeddings.h)
//   POST /tokenize, /detokenize   llama.cpp's (tokenize_endpoints.h)
//   GET  /v1/models               {"object":"list","data":[{"id":…,"object":"model",…}]}
//   GET  /health                  {"status":"ok"}
//   GET  /metrics                 Prometheus text format 0.0.4 (docs/metrics.md)
//   GET  /load                    {"running":…,"waiting":…,"kv_used_blocks":…,"kv_total_blocks":…,
//                                  "kv_utilization":…,"draining":…} for a router (docs/metrics.md)
//   GET  /, /dashboard, /ui/*     the web chat and live dashboard (assets/web_assets.h)
// HEAD is answered wherever GET is, with the same reply (the session sends
// its header only; RFC 9110 section 9.3.2).
// Unknown path: 404 not_found_error; known path, other method: 405 with Allow.
// All errors use ApiError's JSON shape. Pure: no I/O, safe from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/backend.h"
#include "server/choices_formatter.h"
#include "server/http_reply.h"
#include "server/openai_response.h"
#include "server/request_priority.h"
#include "server/responses/response_store.h"

namespace nexus::server {


// A generation to submit: choice 0's request, and, for n > 1, the requests
// of choices 1..n-1, which the session submits once choice 0's first event
// came (choices.h: its prompt's KV is then in the prefix cache).
struct PendingGeneration {
  GenerationRequest request;
  std::vector<GenerationRequest> more;
  std::unique_ptr<ResponseFormatter> formatter;
};

using RouteResult = std::variant<HttpReply, PendingGeneration>;

class ApiRouter {
 public:
  explicit ApiRouter(Backend& backend);

  RouteResult route(std::string_view method, std::string_view target, std::string_view body) const;

  // 429 queue_full for when Backend::submit refuses; queue_full() is the
  // OpenAI reply with Retry-After.
  static ApiError queue_full_error();
  static HttpReply queue_full();
  // 405 method_not_allowed naming `method` and `path`, with `Allow: allow`.
  static HttpReply method_not_allowed(std::string_view method, std::string_view path, std::string_view allow);
  // The Allow value of the path of `target` ("POST", "GET, HEAD"); nullptr
  // for a path the router does not have.
  static const char* allowed_methods(std::string_view target);

  Backend& backend() const { return backend_; }

  // More Prometheus text for GET /metrics, after the backend's (the HTTP
  // server's own counters); called on an I/O thread.
  void set_server_metrics(std::function<std::string()> f) { server_metrics_ = std::move(f); }
  // The server's drain flag, reported by GET /load (null: never draining).
  void set_draining_flag(const std::atomic<bool>* draining) { draining_ = draining; }
  // The highest `priority` a request may ask for (server/request_priority.h).
  void set_max_request_priority(int32_t cap) { max_request_priority_ = cap; }
  // --responses-store-mib (responses/response_store.h) and --strict-tools
  // (a hosted tool in a Responses request is a 400, not left out).
  void set_responses_store_bytes(size_t bytes) { responses_ = std::make_unique<ResponseStore>(bytes); }
  void set_strict_tools(bool strict) { strict_tools_ = strict; }
  ResponseStore& responses() const { return *responses_; }

 private:
  RouteResult completion(Endpoint endpoint, std::string_view body) const;
  RouteResult responses(std::string_view body) const;
  RouteResult messages(std::string_view body) const;
  RouteResult count_tokens(std::string_view body) const;
  void check_model(const std::string& model) const;  // throws 404 not_found_error (Anthropic)
  HttpReply stored_response(std::string_view method, std::string_view rest, std::string_view query) const;

  Backend& backend_;
  std::function<std::string()> server_metrics_;
  const std::atomic<bool>* draining_ = nullptr;
  int32_t max_request_priority_ = kDefaultMaxRequestPriority;
  std::unique_ptr<ResponseStore> responses_ = std::make_unique<ResponseStore>();
  bool strict_tools_ = false;
  int64_t created_;  // unix seconds at startup, reported by /v1/models
};

}  // namespace nexus::server
