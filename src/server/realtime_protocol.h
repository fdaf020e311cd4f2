// The JSON event protocol of GET /v1/realtime (docs/protocol.md): client
// events (parsed by realtime_events.h), the settings they resolve to, and
// the rendering of server events. Pure: no I/O, no state.
//
// Every WebSocket text message is one JSON object with a string "type".
// Client events:
//   session.update     {"session": {model?, system?, return_tokens?, <sampling>}}
//   input.append       {"message": {"role": "user"|"assistant"|"system"|"tool", "content": str}}
//                      or {"text": str}   (content and text non-empty)
//   response.create    {"response": {<sampling>, return_tokens?, prediction?}}   ("response" optional;
//                      prediction: as over HTTP, server/openai_prediction.h; response.done's
//                      usage then has accepted_prediction_tokens and rejected_prediction_tokens)
//   response.cancel    {}
//   response.redirect  input.append's fields + optional "response"
//   session.close      {}
// <sampling> = the request fields of POST /v1/completions that are not the
// prompt (openai_request.h): max_tokens, temperature, top_p, top_k, min_p,
// repeat_penalty, frequency_penalty, presence_penalty, seed, stop,
// ignore_eos, priority (and model). They are checked by parse_openai_request,
// so they mean and are limited exactly as over HTTP.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/chat_template.h"
#include "server/openai_request.h"
#include "server/realtime_events.h"

namespace nexus::server::realtime {


// Generation parameters: a session's defaults merged with a response's
// overrides (JSON objects of <sampling> fields plus return_tokens/system).
struct ResolvedParams {
  ConversationRequest request;          // endpoint Completions; prompt fields unset
  bool return_tokens = false;
};
// Every field is checked as over HTTP, max_tokens against n_ctx too
// (1 <= max_tokens <= n_ctx, tokens), priority against the server's cap
// `max_priority`. Throws EventError: unknown_parameter (unknown key),
// invalid_event ('system' as an override), or the ApiError's code
// (invalid_value / invalid_type / model_not_found / priority_above_cap).
ResolvedParams resolve_params(const nlohmann::json& session, const nlohmann::json& overrides,
                              const std::string& model_id, int32_t n_ctx, int32_t max_priority);

// Server events (serialised JSON, one WebSocket text message each).
// chat_template: ChatTemplate::origin() ("gguf", "file" or "plain").
std::string session_created(const std::string& id, const std::string& model, int32_t n_ctx,
                            const std::string& chat_template);
std::string session_updated(const std::string& id, const nlohmann::json& session);
std::string response_created(const std::string& id, int32_t prompt_tokens, int32_t new_tokens,
                             const std::vector<int32_t>* prompt_ids);
std::string response_delta(const std::string& id, const std::string& text, std::optional<int32_t> token);
std::string response_done(const std::string& id, const GenerationEvent& final_event, int32_t context_tokens);
// error_event: realtime_events.h.

}  // namespace nexus::server::realtime
