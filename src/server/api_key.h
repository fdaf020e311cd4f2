// API keys on the wire: the `Authorization: Bearer KEY` header OpenAI's
// clients send, and the 401 they expect when it is missing or wrong.
//
// `nexus serve --api-key KEY` (one key, as llama.cpp's and vLLM's servers
// have) checks it on every request but GET/HEAD /health, /metrics and /load
// (probes, scrapes and the gateway's load polls stay open), the web chat's
// static files (public: the page must load to ask for the key) and CORS
// preflights (browsers send those without credentials). The gateway's
// per-tenant keys (gateway/api_keys.h) use the same parsing and reply.
//
// Anthropic's clients send the key as `x-api-key: KEY` instead; the server
// takes that header on any path when no bearer credential is present.
//
// A browser cannot put an Authorization header on a WebSocket, so the
// opening handshake of /v1/realtime may carry the key as the subprotocol
// "openai-insecure-api-key.KEY" instead (the name OpenAI's browser clients
// use for their Realtime API), offered beside "realtime", which the server
// then selects (browsers fail a connection that offered subprotocols and
// got none selected).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/core/protocol.h"

namespace nexus::server {

// The KEY of "Bearer KEY" (scheme case-insensitive, spaces around the key
// trimmed); nullopt when the header is not a bearer credential.
std::optional<std::string_view> bearer_token(std::string_view authorization);

// The key a request presents: its bearer credential, else (a WebSocket
// opening handshake's) the "openai-insecure-api-key.KEY" token of its
// Sec-WebSocket-Protocol list, else its x-api-key header (Anthropic's
// clients). nullopt when it presents none.
std::optional<std::string_view> presented_key(std::string_view authorization, std::string_view websocket_protocols,
                                              std::string_view x_api_key = {});

// Whether the comma-separated Sec-WebSocket-Protocol list offers `name`.
bool offers_subprotocol(std::string_view websocket_protocols, std::string_view name);

// Compares in time independent of where the strings differ (no early exit),
// so the reply time does not leak how much of a guessed key was right.
bool same_key(std::string_view a, std::string_view b);

// 401 invalid_api_key (OpenAI's shape). `presented`: whether the request
// carried a bearer credential at all (the message differs).
// The 401 invalid_api_key; on an Anthropic path (core/protocol.h) its
// message names x-api-key, where those clients send the key.
ApiError invalid_api_key(bool presented, Protocol protocol = Protocol::OpenAI);

// Whether `path` (query string excluded) stays open under --api-key.
bool open_without_key(std::string_view method, std::string_view path);

}  // namespace nexus::server
