#include "loadgen/api_wire.h"

namespace nexus::loadgen {

using nlohmann::json;

namespace {

std::string error_message(const json& e) {
  if (e.is_object() && e.contains("message") && e["message"].is_string()) {
    const std::string code = e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() + ": " : "";
    return code + e["message"].get<std::string>();
  }
  return e.is_string() ? e.get<std::string>() : e.dump();
}

// The event as a JSON object and its "type"; info.malformed when it is not one.
json parse_event(std::string_view data, ChunkInfo& info, std::string& type) {
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) info.malformed = true;
  else type = j.value("type", "");
  return j;
}

ChunkInfo interpret_messages_event(std::string_view data) {
  ChunkInfo info;
  std::string type;
  const json j = parse_event(data, info, type);
  if (info.malformed) return info;
  if (type == "content_block_delta") {
    const json d = j.value("delta", json::object());
    if (d.is_object() && d.value("type", "") == "text_delta" && d.contains("text") && d["text"].is_string())
      info.text = d["text"].get<std::string>();
  } else if (type == "message_start" || type == "message_delta") {
    // message_start's usage is the estimate before generation; a
    // message_delta's (cumulative) follows it.
    const json m = type == "message_start" ? j.value("message", json::object()) : j;
    const json u = m.is_object() ? m.value("usage", json::object()) : json::object();
    if (u.is_object()) {
      const auto input = json_count(u, "input_tokens");
      const auto read = json_count(u, "cache_read_input_tokens");
      if (input) info.prompt_tokens = *input + read.value_or(0);
      if (read) info.cached_tokens = read;
      info.completion_tokens = json_count(u, "output_tokens");
    }
  } else if (type == "message_stop") {
    info.done = true;
  } else if (type == "error") {
    info.error = error_message(j.value("error", json::object()));
  }
  return info;
}

}  // namespace

json responses_input(const json& messages, size_t from) {
  json items = json::array();
  for (size_t i = from; i < messages.size(); ++i)
    items.push_back({{"type", "message"}, {"role", messages[i].value("role", "user")}, {"content", messages[i].value("content", json(""))}});
  return items;
}

json request_body(const RequestSpec& req, const json& extra) {
  json b;
  switch (req.api) {
    case Api::Completions:
    case Api::Chat:
      b = {{"max_tokens", req.max_tokens}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
      if (req.api == Api::Chat) b["messages"] = req.messages;
      else b["prompt"] = req.prompt;
      break;
    case Api::Responses:
      b = {{"input", responses_input(req.messages)}, {"max_output_tokens", req.max_tokens}, {"stream", true}};
      break;
    case Api::Messages: {
      // Anthropic takes the system prompt beside the messages.
      std::string system;
      json messages = json::array();
      for (const json& m : req.messages) {
        if (m.value("role", "") != "system") {
          messages.push_back(m);
        } else if (m.contains("content") && m["content"].is_string()) {
          system += (system.empty() ? "" : "\n") + m["content"].get<std::string>();
        }
      }
      b = {{"messages", std::move(messages)}, {"max_tokens", req.max_tokens}, {"stream", true}};
      if (!system.empty()) b["system"] = system;
      break;
    }
  }
  if (!req.model.empty()) b["model"] = req.model;
  if (req.ignore_eos) b["ignore_eos"] = true;
  if (extra.is_object() && !extra.empty()) b.merge_patch(extra);
  return b;
}

std::string request_target(const ServerUrl& server, Api api) {
  switch (api) {
    case Api::Completions: return server.base_path + "/v1/completions";
    case Api::Chat: return server.base_path + "/v1/chat/completions";
    case Api::Responses: return server.base_path + "/v1/responses";
    case Api::Messages: return server.base_path + "/v1/messages";
  }
  return server.base_path;
}

ChunkInfo interpret_responses_event(std::string_view data) {
  ChunkInfo info;
  std::string type;
  const json j = parse_event(data, info, type);
  if (info.malformed) return info;
  if (type == "response.output_text.delta") {
    if (j.contains("delta") && j["delta"].is_string()) info.text = j["delta"].get<std::string>();
  } else if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
    const json r = j.value("response", json::object());
    if (!r.is_object()) {
      info.malformed = true;
      return info;
    }
    if (const json u = r.value("usage", json::object()); u.is_object()) {
      info.prompt_tokens = json_count(u, "input_tokens");
      info.completion_tokens = json_count(u, "output_tokens");
      if (const json d = u.value("input_tokens_details", json::object()); d.is_object())
        info.cached_tokens = json_count(d, "cached_tokens");
    }
    if (type == "response.failed") info.error = error_message(r.value("error", json::object()));
    info.done = true;
  } else if (type == "error") {
    info.error = error_message(j.value("error", json::object()));
  }
  return info;
}

ChunkInfo interpret_event(Api api, std::string_view data) {
  switch (api) {
    case Api::Completions:
    case Api::Chat: return interpret_chunk(data);
    case Api::Responses: return interpret_responses_event(data);
    case Api::Messages: return interpret_messages_event(data);
  }
  return interpret_chunk(data);
}

}  // namespace nexus::loadgen
