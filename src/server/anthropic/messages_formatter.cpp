#include "server/anthropic/messages_formatter.h"

#include <random>

#include <fmt/format.h>

#include "server/core/generation_error.h"
#include "server/core/protocol.h"
#include "server/http_reply.h"
#include "util/json_depth.h"

namespace nexus::server {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string named_event(const char* name, const json& data) {
  return fmt::format("event: {}\ndata: {}\n\n", name, dump(data));
}

const char* stop_reason(OutputEnd end) {
  switch (end) {
    case OutputEnd::Length: return "max_tokens";
    case OutputEnd::StopSequence: return "stop_sequence";
    case OutputEnd::ToolCalls: return "tool_use";
    default: return "end_turn";
  }
}

json usage_json(const Usage& u, int64_t prompt_tokens, bool final) {
  const int64_t prompt = final ? u.prompt_tokens : prompt_tokens;
  const int64_t cached = final ? u.cached_tokens : 0;
  return {{"input_tokens", prompt - cached},
          {"output_tokens", final ? u.completion_tokens : 0},
          {"cache_read_input_tokens", cached},
          {"cache_creation_input_tokens", 0}};
}

// A call's arguments as the `input` object ({} when they do not parse).
json input_object(const std::string& arguments) {
  json v = parse_json_bounded_or_discarded(arguments);
  return v.is_object() ? v : json::object();
}

}  // namespace

MessagesFormatter::MessagesFormatter(bool stream, std::string model, int64_t prompt_tokens,
                                     std::shared_ptr<const tool_calls::ToolCallSetup> tools)
    : model_(std::move(model)), prompt_tokens_(prompt_tokens), stream_(stream), output_(std::move(tools)) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  id_ = fmt::format("msg_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

json MessagesFormatter::message(bool final) const {
  json content = json::array();
  if (final) {
    const OutputMessage& m = output_.message();
    if (!m.text.empty()) content.push_back({{"type", "text"}, {"text", m.text}});
    for (const OutputCall& c : m.calls)
      if (c.complete)
        content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", input_object(c.arguments)}});
  }
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", std::move(content)},
          {"stop_reason", final ? json(stop_reason(output_.end())) : json()},
          {"stop_sequence", final && output_.end() == OutputEnd::StopSequence ? json(output_.stop_sequence()) : json()},
          {"usage", usage_json(usage_, prompt_tokens_, final)}};
}

std::string MessagesFormatter::stream_preamble() {
  if (!stream_) return {};
  std::string out = named_event("message_start", {{"type", "message_start"}, {"message", message(false)}});
  return out + named_event("ping", {{"type", "ping"}});
}

std::string MessagesFormatter::close_block() {
  if (block_ < 0) return {};
  const int b = block_;
  block_ = -1;
  return named_event("content_block_stop", {{"type", "content_block_stop"}, {"index", b}});
}

std::string MessagesFormatter::on_event(const GenerationEvent& ev, int32_t) {
  if (finished_) return {};
  const OutputDelta delta = output_.on_event(ev);
  std::string out;
  if (stream_) {
    if (!delta.text.empty()) {
      if (block_ < 0 || !block_is_text_) {
        out += close_block();
        block_ = next_block_++;
        block_is_text_ = true;
        out += named_event("content_block_start", {{"type", "content_block_start"}, {"index", block_},
                                                   {"content_block", {{"type", "text"}, {"text", ""}}}});
      }
      out += named_event("content_block_delta", {{"type", "content_block_delta"}, {"index", block_},
                                                 {"delta", {{"type", "text_delta"}, {"text", delta.text}}}});
    }
    for (const CallDelta& c : delta.calls) {
      if (c.opens) {
        out += close_block();
        block_ = next_block_++;
        block_is_text_ = false;
        out += named_event("content_block_start",
                           {{"type", "content_block_start"}, {"index", block_},
                            {"content_block", {{"type", "tool_use"}, {"id", c.id}, {"name", c.name},
                                               {"input", json::object()}}}});
      }
      if (!c.arguments.empty())
        out += named_event("content_block_delta",
                           {{"type", "content_block_delta"}, {"index", block_},
                            {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}});
    }
  }
  if (!ev.done) return out;

  finished_ = true;
  usage_ = ev.usage;
  if (output_.end() == OutputEnd::Error || output_.end() == OutputEnd::Cancelled) {
    const ApiError e = generation_error(ev);
    if (!stream_) {
      status_ = e.status;
      return error_body(Protocol::Anthropic, e);
    }
    return out + close_block() + stream_error(e);
  }
  if (!stream_) return dump(message(true));
  out += close_block();
  const json final_message = message(true);
  out += named_event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", final_message["stop_reason"]},
                                                  {"stop_sequence", final_message["stop_sequence"]}}},
                                       {"usage", final_message["usage"]}});
  return out + named_event("message_stop", {{"type", "message_stop"}});
}

HttpReply MessagesFormatter::error_reply(const ApiError& e) const { return server::error_reply(Protocol::Anthropic, e); }

std::string MessagesFormatter::stream_error(const ApiError& e) const {
  return fmt::format("event: error\ndata: {}\n\n", error_body(Protocol::Anthropic, e));
}

}  // namespace nexus::server
