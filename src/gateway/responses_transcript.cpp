#include "gateway/responses_transcript.h"

#include "util/json_depth.h"

namespace nexus::gateway {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

std::string string_field(const ojson& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Refusals the server answers without naming a request: after one, which
// request was refused is not known.
bool loses_track(std::string_view code) {
  return code == "message_too_large" || code == "binary_not_supported" || code == "input_flood";
}

// A request's `input` as items (a string is one user message, as the
// server reads it); nullopt for anything else (the server refuses it).
std::optional<ojson> input_items(const ojson& ev) {
  const auto in = ev.find("input");
  if (in == ev.end()) return ojson::array();
  if (in->is_array()) return *in;
  if (!in->is_string()) return std::nullopt;
  return ojson::array({{{"type", "message"},
                        {"role", "user"},
                        {"content", ojson::array({{{"type", "input_text"}, {"text", in->get<std::string>()}}})}}});
}

// An output message with no text: the server keeps no assistant turn for it.
bool empty_message(const ojson& item) {
  if (string_field(item, "type") != "message") return false;
  const auto content = item.find("content");
  if (content == item.end() || !content->is_array()) return false;
  for (const auto& part : *content)
    if (part.is_object() && !string_field(part, "text").empty()) return false;
  return true;
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

}  // namespace

std::optional<ojson> ResponsesTranscript::whole_input(const std::string& previous, const ojson& input) const {
  const std::optional<ojson>* history = nullptr;
  if (previous.empty()) return input;
  if (previous == last_.id) history = &last_.history;
  else if (previous == moved_.id) history = &moved_.history;
  if (!history || !*history) return std::nullopt;
  ojson whole = **history;
  for (const auto& item : input) whole.push_back(item);
  return whole;
}

std::string ResponsesTranscript::rewritten(ojson event, const ojson& input) {
  event.erase("previous_response_id");
  event["input"] = input;
  return dump(event);
}

void ResponsesTranscript::bound(std::optional<ojson>& history) const {
  if (history && history->dump().size() > max_bytes_) history.reset();
}

std::optional<std::string> ResponsesTranscript::on_client_event(std::string_view text) {
  if (lost_) return std::nullopt;
  ojson ev = parse_json_bounded_or_discarded<ojson>(text);
  // Anything but a response.create is answered by an error that names no
  // request (invalid JSON, another type), or not at all (response.cancel).
  if (!ev.is_object() || string_field(ev, "type") != "response.create") return std::nullopt;
  const std::string previous = string_field(ev, "previous_response_id");
  Request r{std::string(text), std::nullopt};
  if (const auto input = input_items(ev)) r.input = whole_input(previous, *input);
  bound(r.input);
  std::optional<std::string> out;
  if (!previous.empty() && previous == moved_.id && r.input) {
    r.event = rewritten(std::move(ev), *r.input);
    out = r.event;
  }
  pending_.push_back(std::move(r));
  return out;
}

std::string ResponsesTranscript::on_server_event(std::string_view text) {
  if (lost_) return {};
  const ojson ev = parse_json_bounded_or_discarded<ojson>(text);
  if (!ev.is_object()) return {};
  std::string type = string_field(ev, "type");
  if (const auto seq = ev.find("sequence_number"); seq != ev.end() && seq->is_number_integer())
    sequence_ = seq->get<int64_t>();
  const auto response = ev.find("response");
  const std::string id = response != ev.end() && response->is_object() ? string_field(*response, "id") : std::string();
  if (type == "response.created") {
    if (pending_.empty()) {  // an answer to nothing the transcript saw
      lost_ = true;
      return type;
    }
    running_ = std::move(pending_.front());
    pending_.pop_front();
    running_id_ = id;
    running_response_ = response != ev.end() && response->is_object() ? *response : ojson::object();
  } else if (type == "response.completed" || type == "response.incomplete") {
    // The server keeps it as the connection's last response.
    Known kept{id, std::nullopt};
    if (running_ && running_->input) {
      kept.history = std::move(running_->input);
      const auto output = response->find("output");
      if (output != response->end() && output->is_array())
        for (const auto& item : *output)
          if (!empty_message(item)) kept.history->push_back(item);
      bound(kept.history);
    }
    last_ = std::move(kept);
    running_.reset();
  } else if (type == "response.failed") {
    running_.reset();  // not kept: the connection's last response stays
  } else if (type == "error") {
    const auto e = ev.find("error");
    const std::string code = e != ev.end() && e->is_object() ? string_field(*e, "code") : std::string();
    if (loses_track(code)) {
      lost_ = true;
    } else if (string_field(ev, "event") == "response.create") {
      if (pending_.empty()) lost_ = true;
      else pending_.pop_front();
    }
  }
  return type;
}

std::vector<std::string> ResponsesTranscript::death_notice(bool, const std::string& detail) {
  std::vector<std::string> out;
  if (!running_) return out;
  // The response object response.created announced (its model, created_at
  // and echoed request fields), failed: as the server's own response.failed.
  ojson response = running_response_.is_object() ? running_response_ : ojson::object();
  response["id"] = running_id_;
  response["object"] = "response";
  response["status"] = "failed";
  response["error"] = {{"code", "replica_failed"},
                       {"message", "The replica serving this connection failed (" + detail +
                                       "); the connection goes on on another replica. Send the request again."}};
  response["output"] = ojson::array();
  response["usage"] = nullptr;
  const ojson failed = {{"type", "response.failed"}, {"sequence_number", sequence_ + 1}, {"response", response}};
  out.push_back(dump(failed));
  return out;
}

std::string ResponsesTranscript::error_event(const std::string& code, const std::string& message,
                                             bool client_fault) const {
  return dump({{"type", "error"},
               {"status", client_fault ? 400 : 502},
               {"error",
                {{"type", client_fault ? "invalid_request_error" : "server_error"},
                 {"code", code},
                 {"message", message},
                 {"param", nullptr}}}});
}

std::vector<std::string> ResponsesTranscript::replay() {
  running_.reset();  // ended by death_notice()
  if (!last_.id.empty()) moved_ = std::move(last_);
  last_ = {};
  std::vector<std::string> out;
  for (Request& r : pending_) {
    ojson ev = parse_json_bounded_or_discarded<ojson>(r.event);
    // Whatever it continued was on the dead replica: it goes with its
    // whole input where the transcript knows it.
    if (r.input && ev.is_object() && !string_field(ev, "previous_response_id").empty())
      r.event = rewritten(std::move(ev), *r.input);
    out.push_back(r.event);
  }
  return out;
}

}  // namespace nexus::gateway
