// The JSON event protocol of GET /v1/realtime (docs/protocol.md): parsing of
// client events and rendering of server events. Pure: no I/O, no state.
//
// Every WebSocket text message is one JSON object with a string "type".
// Client events:
//   session.update     {"session": {model?, system?, return_tokens?, <sampling>}}
//   input.append       {"message": {"role": "user"|"system"|"tool", "content": str}}
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
// ignore_eos, priority (and model). They are checked by parse_api_request,
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

namespace nexus::server::realtime {

// A rejected client event: becomes an `error` server event; the connection
// stays open. Codes are listed in docs/protocol.md.
struct EventError : std::runtime_error {
  EventError(std::string code, std::string message)
      : std::runtime_error(message), code(std::move(code)), message(std::move(message)) {}
  std::string code;
  std::string message;  // whole, NUL bytes included (what() stops at the first)
  std::string event;  // the client event's "type" as sent, once known ("" before)
};

enum class EventType { SessionUpdate, InputAppend, ResponseCreate, ResponseCancel, ResponseRedirect, SessionClose };

// One item of conversation input: a chat message or raw text.
struct InputItem {
  bool is_message = false;
  ChatMessage message;  // when is_message
  std::string text;     // otherwise
};

struct ClientEvent {
  EventType type = EventType::SessionClose;
  std::string type_name;            // as sent, for error events
  nlohmann::json session;           // session.update: the (object) "session" field
  std::optional<InputItem> input;   // input.append, response.redirect
  nlohmann::json response;          // response.create/.redirect overrides: an object ({} when absent)
};

// Throws EventError: invalid_json, invalid_event (not an object, missing or
// mistyped field), invalid_value (a field of the right type with a value it
// cannot have: a role other than user/system/tool, an empty text or
// content), unknown_event (unknown "type"). Once the frame had a string
// "type", the error's `event` holds it.
ClientEvent parse_client_event(std::string_view frame);

// Generation parameters: a session's defaults merged with a response's
// overrides (JSON objects of <sampling> fields plus return_tokens/system).
struct ResolvedParams {
  ApiRequest request;          // endpoint Completions; prompt fields unset
  bool return_tokens = false;
};
// Every field is checked as over HTTP, max_tokens against n_ctx too
// (1 <= max_tokens <= n_ctx, tokens). Throws EventError: unknown_parameter
// (unknown key), invalid_event ('system' as an override), or the ApiError's
// code (invalid_value / invalid_type / model_not_found).
ResolvedParams resolve_params(const nlohmann::json& session, const nlohmann::json& overrides,
                              const std::string& model_id, int32_t n_ctx);

// Server events (serialised JSON, one WebSocket text message each).
// chat_template: ChatTemplate::origin() ("gguf", "file" or "plain").
std::string session_created(const std::string& id, const std::string& model, int32_t n_ctx,
                            const std::string& chat_template);
std::string session_updated(const std::string& id, const nlohmann::json& session);
std::string response_created(const std::string& id, int32_t prompt_tokens, int32_t new_tokens,
                             const std::vector<int32_t>* prompt_ids);
std::string response_delta(const std::string& id, const std::string& text, std::optional<int32_t> token);
std::string response_done(const std::string& id, const GenerationEvent& final_event, int32_t context_tokens);
std::string error_event(const std::string& code, const std::string& message, const std::string& event_type = {});

}  // namespace nexus::server::realtime
