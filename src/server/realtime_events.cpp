#include "server/realtime_events.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "server/api_error.h"
#include "util/json_depth.h"

namespace nexus::server::realtime {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<EventType, std::string_view>, 6> kTypes{{
    {EventType::SessionUpdate, "session.update"},
    {EventType::InputAppend, "input.append"},
    {EventType::ResponseCreate, "response.create"},
    {EventType::ResponseCancel, "response.cancel"},
    {EventType::ResponseRedirect, "response.redirect"},
    {EventType::SessionClose, "session.close"},
}};

InputItem parse_input(const json& ev) {
  const bool has_message = ev.contains("message") && !ev["message"].is_null();
  const bool has_text = ev.contains("text") && !ev["text"].is_null();
  if (has_message == has_text)
    throw EventError("invalid_event", "Expected exactly one of 'message' (a chat message) and 'text' (raw text).");
  InputItem item;
  if (has_text) {
    if (!ev["text"].is_string()) throw EventError("invalid_event", "'text' must be a non-empty string.");
    if (ev["text"].get_ref<const std::string&>().empty())
      throw EventError("invalid_value", "'text' must be a non-empty string.");
    item.text = ev["text"].get<std::string>();
    return item;
  }
  const json& m = ev["message"];
  if (!m.is_object()) throw EventError("invalid_event", "'message' must be an object {\"role\", \"content\"}.");
  const auto role = m.find("role");
  const auto content = m.find("content");
  if (role == m.end() || !role->is_string())
    throw EventError("invalid_event", "'message.role' must be \"user\", \"assistant\", \"system\" or \"tool\".");
  const std::string r = role->get<std::string>();
  if (r != "user" && r != "assistant" && r != "system" && r != "tool")
    throw EventError("invalid_value", fmt::format(
                                          "'message.role' must be \"user\", \"assistant\", \"system\" or \"tool\", not \"{}\".", r));
  if (content == m.end() || !content->is_string())
    throw EventError("invalid_event", "'message.content' must be a non-empty string.");
  if (content->get_ref<const std::string&>().empty())
    throw EventError("invalid_value", "'message.content' must be a non-empty string.");
  item.is_message = true;
  item.message = ChatMessage{r, content->get<std::string>(), nullptr, "", ""};
  return item;
}

json optional_object(const json& ev, const char* key) {
  if (!ev.contains(key) || ev[key].is_null()) return json::object();
  if (!ev[key].is_object()) throw EventError("invalid_event", fmt::format("'{}' must be an object.", key));
  return ev[key];
}

// The fields of an event whose type is known.
void parse_fields(const json& ev, ClientEvent& out) {
  switch (out.type) {
    case EventType::SessionUpdate:
      if (!ev.contains("session") || !ev["session"].is_object())
        throw EventError("invalid_event", "'session.update' needs a 'session' object.");
      out.session = ev["session"];
      break;
    case EventType::InputAppend:
      out.input = parse_input(ev);
      break;
    case EventType::ResponseRedirect:
      out.input = parse_input(ev);
      out.response = optional_object(ev, "response");
      break;
    case EventType::ResponseCreate:
      out.response = optional_object(ev, "response");
      break;
    case EventType::ResponseCancel:
    case EventType::SessionClose:
      break;
  }
}

}  // namespace

ClientEvent parse_client_event(std::string_view frame) {
  json ev;
  try {
    ev = parse_json_bounded(frame);
  } catch (const JsonTooDeep& e) {
    throw EventError("nesting_too_deep", json_too_deep_message(e.limit));
  } catch (const json::exception&) {
    throw EventError("invalid_json", "The message is not valid JSON.");
  }
  if (!ev.is_object()) throw EventError("invalid_event", "An event must be a JSON object.");
  const auto type = ev.find("type");
  if (type == ev.end() || !type->is_string()) throw EventError("invalid_event", "An event needs a string 'type'.");
  ClientEvent out;
  out.type_name = type->get<std::string>();
  try {
    bool known = false;
    for (const auto& [t, name] : kTypes) {
      if (name == out.type_name) {
        out.type = t;
        known = true;
      }
    }
    if (!known) throw EventError("unknown_event", fmt::format("Unknown event type '{}'.", printable(out.type_name)));
    parse_fields(ev, out);
  } catch (EventError& e) {
    e.event = out.type_name;  // the error event names what it answers
    throw;
  }
  return out;
}

std::string error_event(const std::string& code, const std::string& message, const std::string& event_type) {
  json e{{"code", code}, {"message", message}};
  if (!event_type.empty()) e["event"] = event_type;
  return json{{"type", "error"}, {"error", std::move(e)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace nexus::server::realtime
