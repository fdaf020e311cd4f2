#include "gateway/realtime_transcript.h"

#include <algorithm>
#include <array>

#include "server/realtime_events.h"
#include "util/json_depth.h"

namespace nexus::gateway {

using nlohmann::json;
namespace rt = server::realtime;

namespace {

// Refusals after which the gateway cannot tell what the replica kept.
bool loses_track(std::string_view code) {
  return code == "input_too_large" || code == "message_too_large" || code == "slow_consumer";
}

// Refusals of a response.create that discard the queued input (docs/protocol.md).
bool discards_input(std::string_view code) {
  return code == "context_length_exceeded" || code == "chat_template_rejected" || code == "chat_template_error";
}

json item_json(const rt::InputItem& in) {
  if (!in.is_message) return json{{"text", in.text}};
  return json{{"message", {{"role", in.message.role}, {"content", in.message.content}}}};
}

std::string string_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

bool RealtimeTranscript::insert_item(json input, size_t at) {
  Item item{std::move(input), 0};
  item.bytes = item.input.dump().size();
  bytes_ += item.bytes;
  if (bytes_ > max_bytes_) {
    lost_ = true;
    return false;
  }
  items_.insert(items_.begin() + static_cast<std::ptrdiff_t>(at), std::move(item));
  return true;
}

std::optional<std::string> RealtimeTranscript::on_client_event(std::string_view text) {
  if (lost_) return std::nullopt;
  rt::ClientEvent ev;
  try {
    ev = rt::parse_client_event(text);
  } catch (const rt::EventError&) {
    return std::nullopt;  // the replica refuses it too: not part of the session
  }
  switch (ev.type) {
    case rt::EventType::SessionUpdate:
      updates_.emplace_back(std::string(text));
      break;
    case rt::EventType::InputAppend:
      insert_item(item_json(*ev.input), items_.size());
      break;
    case rt::EventType::ResponseRedirect:
      // Cancel + append + create: replayed as the append and a plain create
      // (in a new session no response runs).
      insert_item(item_json(*ev.input), items_.size());
      creates_.push_back({json{{"type", "response.create"}, {"response", ev.response}}.dump(), items_.size()});
      break;
    case rt::EventType::ResponseCreate:
      creates_.push_back({std::string(text), items_.size()});
      break;
    case rt::EventType::SessionClose:
      closing_ = true;
      break;
    case rt::EventType::ResponseCancel:
      break;
  }
  return std::nullopt;
}

void RealtimeTranscript::answered_create(bool created) {
  if (creates_.empty()) {  // an answer to nothing the transcript saw
    lost_ = true;
    return;
  }
  const size_t at = std::min(creates_.front().position, items_.size());
  creates_.pop_front();
  if (!created) return;
  committed_ = at;
  response_at_ = at;
  response_text_.clear();
}

void RealtimeTranscript::end_response() {
  running_.reset();
  if (response_text_.empty()) return;
  const bool chat = response_at_ > 0 && items_[response_at_ - 1].input.contains("message");
  json item = chat ? json{{"message", {{"role", "assistant"}, {"content", response_text_}}}}
                   : json{{"text", response_text_}};
  response_text_.clear();
  // The response's text follows the input it was created over; input
  // appended while it ran, and the creates sent since, come after it.
  if (!insert_item(std::move(item), response_at_)) return;
  for (auto& c : creates_)
    if (c.position >= response_at_) ++c.position;
  committed_ = response_at_ + 1;
}

std::string RealtimeTranscript::on_server_event(std::string_view text) {
  if (lost_) return {};
  json ev = parse_json_bounded_or_discarded(text);
  if (!ev.is_object()) return {};
  std::string type = string_field(ev, "type");
  if (type == "response.delta") {
    if (running_) response_text_ += string_field(ev, "text");
  } else if (type == "response.created") {
    answered_create(true);
    const auto r = ev.find("response");
    running_ = r != ev.end() && r->is_object() ? string_field(*r, "id") : std::string();
  } else if (type == "response.done") {
    end_response();
  } else if (type == "session.updated") {
    if (!updates_.empty()) updates_.pop_front();
    const auto s = ev.find("session");
    if (s != ev.end() && s->is_object()) {
      settings_ = *s;
      settings_.erase("id");
    }
  } else if (type == "error") {
    const auto e = ev.find("error");
    if (e == ev.end() || !e->is_object()) return type;
    const std::string code = string_field(*e, "code"), event = string_field(*e, "event");
    if (loses_track(code)) {
      lost_ = true;
    } else if (event == "session.update") {
      if (!updates_.empty()) updates_.pop_front();
    } else if (event == "response.create" || event == "response.redirect") {
      if (discards_input(code) && !creates_.empty()) {
        // The replica dropped the queued input this create covered.
        const size_t end = std::min(creates_.front().position, items_.size());
        for (size_t i = committed_; i < end; ++i) bytes_ -= items_[i].bytes;
        const size_t n = end > committed_ ? end - committed_ : 0;
        items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(committed_),
                     items_.begin() + static_cast<std::ptrdiff_t>(committed_ + n));
        for (auto& c : creates_) c.position = c.position >= end ? c.position - n : committed_;
      }
      answered_create(false);
    }
  }
  return type;
}

std::vector<std::string> RealtimeTranscript::death_notice(bool moving, const std::string& detail) {
  std::vector<std::string> out;
  if (running_)
    out.push_back(json{{"type", "response.done"},
                       {"response",
                        {{"id", *running_},
                         {"finish_reason", "error"},
                         {"usage", {{"prompt_tokens", 0}, {"completion_tokens", 0}, {"total_tokens", 0}, {"cached_tokens", 0}}},
                         {"error", "the replica serving the session failed"}}}}
                      .dump(-1, ' ', false, json::error_handler_t::replace));
  if (moving)
    out.push_back(rt::error_event("replica_failed",
                                  "The replica serving this session failed (" + detail +
                                      "). The session goes on in a new session on another replica, given the "
                                      "conversation so far (session.created follows)."));
  return out;
}

std::string RealtimeTranscript::error_event(const std::string& code, const std::string& message, bool) const {
  return rt::error_event(code, message);
}

std::vector<std::string> RealtimeTranscript::replay() {
  if (running_) end_response();
  std::vector<std::string> out;
  std::deque<std::optional<std::string>> expected;
  if (!settings_.empty()) {
    out.push_back(json{{"type", "session.update"}, {"session", settings_}}.dump());
    expected.emplace_back(std::nullopt);
  }
  for (auto& u : updates_)
    if (u) {
      out.push_back(*u);
      expected.push_back(std::move(u));
    }
  updates_ = std::move(expected);
  size_t c = 0;
  for (size_t i = 0; i <= items_.size(); ++i) {
    for (; c < creates_.size() && creates_[c].position <= i; ++c) out.push_back(creates_[c].event);
    if (i == items_.size()) break;
    json append = items_[i].input;
    append["type"] = "input.append";
    out.push_back(append.dump());
  }
  committed_ = 0;  // in the new session everything is queued input until its first response
  return out;
}

}  // namespace nexus::gateway
