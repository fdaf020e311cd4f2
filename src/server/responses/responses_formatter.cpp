#include "server/responses/responses_formatter.h"

#include <chrono>
#include <random>

#include <fmt/format.h>

#include "server/core/generation_error.h"
#include "server/http_reply.h"
#include "server/sse.h"

namespace nexus::server {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

}  // namespace

std::string make_responses_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:016x}{:016x}", prefix, rng(), rng(), rng());
}

ResponsesFormatter::ResponsesFormatter(const ResponsesRequest& req, std::string model,
                                       std::shared_ptr<const tool_calls::ToolCallSetup> tools, ResponseStore* store,
                                       ResponseStore* connection, Framing framing)
    : id_(make_responses_id("resp_")),
      model_(std::move(model)),
      created_at_(std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count()),
      stream_(req.conversation.stream || framing == Framing::Frames),
      output_(std::move(tools)),
      store_(req.store ? store : nullptr),
      connection_(connection),
      framing_(framing),
      input_items_(req.input_items),
      transcript_(req.transcript) {
  const ConversationRequest& c = req.conversation;
  json metadata = req.metadata;
  if (!req.dropped_tools.empty()) {
    std::string names;
    for (const std::string& t : req.dropped_tools) names += (names.empty() ? "" : ",") + t;
    metadata["nexus_dropped_tools"] = names;
  }
  echo_ = {{"instructions", req.instructions.empty() ? json() : json(req.instructions)},
           {"max_output_tokens", req.max_output_tokens ? json(*req.max_output_tokens) : json()},
           {"metadata", std::move(metadata)},
           {"parallel_tool_calls", c.tool_use.parallel},
           {"previous_response_id", req.previous_response_id ? json(*req.previous_response_id) : json()},
           {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
           {"store", req.store},
           {"temperature", c.sampling.temperature},
           {"text", {{"format", req.text_format}}},
           {"tool_choice", req.tool_choice},
           {"tools", json::parse(req.tools_echo.dump())},
           {"top_p", c.sampling.top_p},
           {"truncation", "disabled"},
           {"user", nullptr}};
}

std::string ResponsesFormatter::event(json ev) {
  ev["sequence_number"] = sequence_++;
  // SSE: the event's type as the `event:` line too, as OpenAI's API sends it.
  if (framing_ == Framing::Sse) return "event: " + ev["type"].get<std::string>() + "\n" + sse_event(dump(ev));
  frames_.push_back(dump(ev));
  return {};
}

json ResponsesFormatter::item_json(const Item& it) const {
  const OutputMessage& m = output_.message();
  const bool ended = output_.done();
  if (!it.is_call) {
    const char* status = !ended ? "in_progress" : output_.end() == OutputEnd::Length ? "incomplete" : "completed";
    return {{"id", it.id}, {"type", "message"}, {"status", status}, {"role", "assistant"},
            {"content", json::array({{{"type", "output_text"}, {"text", m.text}, {"annotations", json::array()}}})}};
  }
  const OutputCall& c = m.calls[it.call];
  const char* status = !ended ? "in_progress" : c.complete ? "completed" : "incomplete";
  return {{"id", it.id}, {"type", "function_call"}, {"status", status}, {"call_id", c.id}, {"name", c.name},
          {"arguments", c.arguments}};
}

json ResponsesFormatter::response() const {
  json r = {{"id", id_}, {"object", "response"}, {"created_at", created_at_}, {"status", status_name_},
            {"error", error_}, {"incomplete_details", nullptr}, {"model", model_}};
  r.update(echo_);
  if (status_name_ == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  json output = json::array();
  if (output_.done())
    for (const Item& it : items_) output.push_back(item_json(it));
  r["output"] = std::move(output);
  r["usage"] = output_.done() ? usage_json(usage_) : json();
  return r;
}

std::string ResponsesFormatter::stream_preamble() {
  if (!stream_) return {};
  std::string out = event({{"type", "response.created"}, {"response", response()}});
  return out + event({{"type", "response.in_progress"}, {"response", response()}});
}

std::string ResponsesFormatter::open_text() {
  text_item_ = static_cast<int>(items_.size());
  items_.push_back({make_responses_id("msg_"), false, 0});
  const Item& it = items_.back();
  if (!stream_) return {};
  const json item = {{"id", it.id}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                     {"content", json::array()}};
  std::string out = event({{"type", "response.output_item.added"}, {"output_index", text_item_}, {"item", item}});
  return out + event({{"type", "response.content_part.added"}, {"item_id", it.id}, {"output_index", text_item_},
                {"content_index", 0},
                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
}

std::string ResponsesFormatter::on_event(const GenerationEvent& ev, int32_t) {
  if (finished_) return {};
  const OutputDelta delta = output_.on_event(ev);
  std::string out;
  if (!delta.text.empty()) {
    if (text_item_ < 0) out += open_text();
    if (stream_)
      out += event({{"type", "response.output_text.delta"}, {"item_id", items_[text_item_].id},
                    {"output_index", text_item_}, {"content_index", 0}, {"delta", delta.text},
                    {"logprobs", json::array()}});
  }
  for (const CallDelta& c : delta.calls) {
    if (c.opens) items_.push_back({make_responses_id("fc_"), true, c.index});
    if (!stream_) continue;
    size_t at = 0;
    while (!(items_[at].is_call && items_[at].call == c.index)) ++at;
    const Item& it = items_[at];
    if (c.opens)
      out += event({{"type", "response.output_item.added"}, {"output_index", at},
                    {"item", {{"id", it.id}, {"type", "function_call"}, {"status", "in_progress"},
                              {"call_id", c.id}, {"name", c.name}, {"arguments", ""}}}});
    if (!c.arguments.empty())
      out += event({{"type", "response.function_call_arguments.delta"}, {"item_id", it.id}, {"output_index", at},
                    {"delta", c.arguments}});
  }
  if (!ev.done) return out;

  finished_ = true;
  usage_ = ev.usage;
  switch (output_.end()) {
    case OutputEnd::Length: status_name_ = "incomplete"; break;
    case OutputEnd::Error:
    case OutputEnd::Cancelled: {
      status_name_ = "failed";
      const ApiError e = generation_error(ev);
      error_ = {{"code", e.code.empty() ? "server_error" : e.code}, {"message", e.message}};
      if (!stream_) {
        status_ = e.status;
        return error_body(e);
      }
      break;
    }
    default: status_name_ = "completed"; break;
  }
  if (status_name_ != "failed") save();
  if (!stream_) return dump(response());
  for (size_t at = 0; at < items_.size(); ++at) {
    const Item& it = items_[at];
    const json item = item_json(it);
    if (!it.is_call) {
      const std::string& text = output_.message().text;
      const json part = {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
      out += event({{"type", "response.output_text.done"}, {"item_id", it.id}, {"output_index", at},
                    {"content_index", 0}, {"text", text}, {"logprobs", json::array()}});
      out += event({{"type", "response.content_part.done"}, {"item_id", it.id}, {"output_index", at},
                    {"content_index", 0}, {"part", part}});
    } else {
      out += event({{"type", "response.function_call_arguments.done"}, {"item_id", it.id}, {"output_index", at},
                    {"name", item["name"]}, {"arguments", item["arguments"]}});
    }
    out += event({{"type", "response.output_item.done"}, {"output_index", at}, {"item", item}});
  }
  const char* type = status_name_ == "completed"    ? "response.completed"
                     : status_name_ == "incomplete" ? "response.incomplete"
                                                    : "response.failed";
  return out + event({{"type", type}, {"response", response()}});
}

std::string ResponsesFormatter::events_without_output(const Usage& usage) {
  GenerationEvent done;
  done.done = true;
  done.usage = usage;
  finished_ = true;
  (void)output_.on_event(done);
  usage_ = usage;
  status_name_ = "completed";
  save();
  json created = response();
  created["status"] = "in_progress";
  created["usage"] = nullptr;
  std::string out = event({{"type", "response.created"}, {"response", created}});
  return out + event({{"type", "response.completed"}, {"response", response()}});
}

void ResponsesFormatter::save() {
  if (!store_ && !connection_) return;
  StoredResponse s;
  s.response = response();
  s.input_items = std::move(input_items_);
  s.transcript = std::move(transcript_);
  const OutputMessage& m = output_.message();
  if (!m.text.empty() || !m.calls.empty()) {
    ChatMessage reply{"assistant", m.text, nullptr, "", ""};
    if (!m.calls.empty()) {
      reply.tool_calls = nlohmann::ordered_json::array();
      for (const OutputCall& c : m.calls)
        reply.tool_calls.push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    s.transcript.push_back(std::move(reply));
  }
  if (connection_) connection_->put(id_, s);
  if (store_) store_->put(id_, std::move(s));
}

HttpReply ResponsesFormatter::error_reply(const ApiError& e) const { return server::error_reply(e); }

std::string ResponsesFormatter::stream_error(const ApiError& e) const {
  json r = response();
  r["status"] = "failed";
  r["error"] = {{"code", e.code.empty() ? "server_error" : e.code}, {"message", e.message}};
  // const: the sequence number of the last event is not advanced (nothing follows it).
  r = {{"type", "response.failed"}, {"response", std::move(r)}, {"sequence_number", sequence_}};
  return "event: response.failed\n" + sse_event(dump(r));
}

}  // namespace nexus::server
