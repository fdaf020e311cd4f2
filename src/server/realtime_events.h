// The client events of GET /v1/realtime (docs/protocol.md): their types, the
// parser, and the `error` event that answers one refused. Pure: no I/O, no
// state, no engine. Shared by the server's
// sessions (realtime_session.h) and the gateway's transcript
// (gateway/realtime_transcript.h), so both read an event the same way.
//
// Every WebSocket text message is one JSON object with a string "type";
// the client events and their fields are listed in realtime_protocol.h.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/chat_template.h"

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
// cannot have: a role other than user/assistant/system/tool, an empty text or
// content), unknown_event (unknown "type"). Once the frame had a string
// "type", the error's `event` holds it.
ClientEvent parse_client_event(std::string_view frame);

// The `error` server event (serialised JSON): {"type": "error", "error":
// {code, message, event?}}; `event_type` (the client event's "type" as
// sent) is left out when empty. Invalid UTF-8 in the texts is replaced.
std::string error_event(const std::string& code, const std::string& message, const std::string& event_type = {});

}  // namespace nexus::server::realtime
