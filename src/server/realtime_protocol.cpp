#include "server/realtime_protocol.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/prompt_builder.h"

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

// The <sampling> keys (checked by parse_api_request) and the protocol's own.
constexpr std::array<std::string_view, 13> kSamplingKeys{
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "frequency_penalty",
    "presence_penalty", "seed", "stop", "ignore_eos", "priority"};

bool is_sampling_key(std::string_view k) {
  for (std::string_view s : kSamplingKeys)
    if (s == k) return true;
  return false;
}

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
    throw EventError("invalid_event", "'message.role' must be \"user\", \"system\" or \"tool\".");
  const std::string r = role->get<std::string>();
  if (r != "user" && r != "system" && r != "tool")
    throw EventError("invalid_value",
                     fmt::format("'message.role' must be \"user\", \"system\" or \"tool\", not \"{}\".", r));
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
  json ev = json::parse(frame, nullptr, false);
  if (ev.is_discarded()) throw EventError("invalid_json", "The message is not valid JSON.");
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

ResolvedParams resolve_params(const json& session, const json& overrides, const std::string& model_id,
                              int32_t n_ctx) {
  ResolvedParams out;
  // A completions body made of the sampling fields: parse_api_request is the
  // one place where they are checked. The prompt is a placeholder.
  json body = json::object();
  for (const json* layer : {&session, &overrides}) {
    for (auto it = layer->begin(); it != layer->end(); ++it) {
      const std::string& k = it.key();
      if (k == "return_tokens") {
        if (!it->is_null() && !it->is_boolean()) throw EventError("invalid_type", "'return_tokens' must be a boolean.");
        if (it->is_boolean()) out.return_tokens = it->get<bool>();
      } else if (k == "system") {
        if (layer == &overrides) throw EventError("invalid_event", "'system' is a session setting (session.update).");
      } else if (k == "prediction") {  // Predicted Outputs: per response only
        if (layer == &session) throw EventError("invalid_event", "'prediction' is per response (response.create).");
        body[k] = *it;
      } else if (is_sampling_key(k)) {
        body[k] = *it;
      } else {
        throw EventError("unknown_parameter", fmt::format("Unknown parameter '{}'.", k));
      }
    }
  }
  body["prompt"] = json::array({0});
  try {
    out.request = parse_api_request(Endpoint::Completions, body.dump());
    check_max_tokens(out.request.max_tokens, n_ctx);
  } catch (const ApiError& e) {
    throw EventError(e.code.empty() ? "invalid_value" : e.code, e.message);
  }
  if (!out.request.model.empty() && out.request.model != model_id) {
    throw EventError("model_not_found",
                     fmt::format("The model '{}' does not exist; this server serves '{}'.", printable(out.request.model), model_id));
  }
  return out;
}

std::string session_created(const std::string& id, const std::string& model, int32_t n_ctx,
                            const std::string& chat_template) {
  return json{{"type", "session.created"},
              {"session", {{"id", id}, {"model", model}, {"n_ctx", n_ctx}, {"chat_template", chat_template}}}}
      .dump();
}

std::string session_updated(const std::string& id, const json& session) {
  json s = session;
  s["id"] = id;
  return json{{"type", "session.updated"}, {"session", std::move(s)}}.dump();
}

std::string response_created(const std::string& id, int32_t prompt_tokens, int32_t new_tokens,
                             const std::vector<int32_t>* prompt_ids) {
  json r{{"id", id}, {"prompt_tokens", prompt_tokens}, {"input_tokens", new_tokens}};
  if (prompt_ids) r["prompt_token_ids"] = *prompt_ids;
  return json{{"type", "response.created"}, {"response", std::move(r)}}.dump();
}

std::string response_delta(const std::string& id, const std::string& text, std::optional<int32_t> token) {
  json d{{"type", "response.delta"}, {"response_id", id}, {"text", text}};
  if (token) d["token"] = *token;
  // Replacement instead of throwing: engine text is valid UTF-8 by contract.
  return d.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string response_done(const std::string& id, const GenerationEvent& ev, int32_t context_tokens) {
  const Usage& u = ev.usage;
  const double ttft_ms = ev.timings.ttft_s * 1e3;
  // Decode rate after the first token (the first one's time is the TTFT).
  const double tps = ev.timings.decode_s > 0 ? (u.completion_tokens - 1) / ev.timings.decode_s : 0.0;
  json r{{"id", id},
         {"finish_reason", finish_reason_name(ev.finish)},
         {"usage",
          {{"prompt_tokens", u.prompt_tokens},
           {"completion_tokens", u.completion_tokens},
           {"total_tokens", u.prompt_tokens + u.completion_tokens},
           {"cached_tokens", u.cached_tokens}}},
         {"ttft_ms", std::round(ttft_ms * 1000) / 1000},
         {"tokens_per_s", std::round(tps * 100) / 100},
         {"context_tokens", context_tokens}};
  if (ev.finish == FinishReason::Error) r["error"] = ev.error;
  if (u.accepted_prediction_tokens + u.rejected_prediction_tokens > 0) {
    r["usage"]["accepted_prediction_tokens"] = u.accepted_prediction_tokens;
    r["usage"]["rejected_prediction_tokens"] = u.rejected_prediction_tokens;
  }
  return json{{"type", "response.done"}, {"response", std::move(r)}}.dump(-1, ' ', false,
                                                                          json::error_handler_t::replace);
}

std::string error_event(const std::string& code, const std::string& message, const std::string& event_type) {
  json e{{"code", code}, {"message", message}};
  if (!event_type.empty()) e["event"] = event_type;
  return json{{"type", "error"}, {"error", std::move(e)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace nexus::server::realtime
