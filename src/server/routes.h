// The server's routes: one table that every part deciding by path reads
// (the router's methods, 404 and 405; dispatch's WebSocket upgrades and the
// stats stream; CORS preflights; the paths open without an API key; the
// error shape of each path; what the gateway does with a path: relay a
// WebSocket, count a generation's usage, cap its priority). A path under
// /v1 is also served without it (as OpenAI clients configured with a base
// URL that lacks /v1 send it); the web chat's files (assets/) come after the
// table.
#pragma once

#include <string_view>

#include "server/core/protocol.h"

namespace nexus::server {

enum class RouteId {
  Completions,         // POST /v1/completions
  ChatCompletions,     // POST /v1/chat/completions
  Responses,           // POST /v1/responses; GET with an Upgrade: the WebSocket mode
  StoredResponse,      // GET, DELETE /v1/responses/{id}
  ResponseCancel,      // POST /v1/responses/{id}/cancel
  ResponseInputItems,  // GET /v1/responses/{id}/input_items
  Messages,            // POST /v1/messages (Anthropic)
  CountTokens,         // POST /v1/messages/count_tokens (Anthropic)
  Embeddings,          // POST /v1/embeddings
  Models,              // GET /v1/models
  Model,               // GET /v1/models/{id}
  Realtime,            // GET /v1/realtime (a WebSocket upgrade only)
  StatsStream,         // GET /v1/stats/stream (SSE)
  Tokenize,            // POST /tokenize (llama.cpp's)
  Detokenize,          // POST /detokenize
  Health,              // GET /health
  Metrics,             // GET /metrics
  Load,                // GET /load
};

struct Route {
  RouteId id;
  std::string_view path;    // exact, or the part before {id} (with `suffix` after it)
  std::string_view suffix;  // "" for an exact path; else the path is path + {id} + suffix
  bool v1;                  // the path is under /v1 (and served without it too)
  const char* methods;      // as for Allow (HEAD goes with GET)
  Protocol protocol;        // the error shape
  bool open;                // GET/HEAD without an API key (status and health)
  bool websocket;           // a GET with Upgrade: websocket opens a session
  bool generation;          // its answer is a generation: usage, priority (the gateway reads them)
};

// The route of a request target (query string ignored); nullptr when none.
const Route* find_route(std::string_view target);
// The target's path: without its query string.
std::string_view target_path(std::string_view target);

}  // namespace nexus::server
