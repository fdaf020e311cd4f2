#include "server/openai_response.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/core/generation_error.h"
#include "server/sse.h"

namespace nexus::server {

using nlohmann::json;

namespace {

const char* finish_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: break;
  }
  return "error";
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json timings_json(const GenerationEvent& ev) {
  const double tokens_per_s =
      ev.timings.decode_s > 0 && ev.usage.completion_tokens > 1
          ? (ev.usage.completion_tokens - 1) / ev.timings.decode_s
          : 0.0;
  return {{"queue_ms", ev.timings.queue_s * 1e3},
          {"prefill_ms", ev.timings.prefill_s * 1e3},
          {"ttft_ms", ev.timings.ttft_s * 1e3},
          {"decode_ms", ev.timings.decode_s * 1e3},
          {"decode_tokens_per_s", tokens_per_s}};
}

json bytes_json(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

json chat_entry(const TokenLogprob& t) {
  return {{"token", t.piece}, {"logprob", t.logprob}, {"bytes", bytes_json(t.piece)}};
}

std::string error_payload(const GenerationEvent& ev) { return error_body(generation_error(ev)); }

}  // namespace

// A neutral delta as a chat completion chunk's `delta` (OpenAI's "The chat
// completion chunk object"): {"content"} and/or {"tool_calls": [{"index",
// "id", "type", "function": {"name", "arguments"}}]} for a call's first
// piece, [{"index", "function": {"arguments"}}] for the later ones.
json chat_delta(const OutputDelta& d) {
  json delta = json::object();
  if (!d.text.empty()) delta["content"] = d.text;
  if (d.calls.empty()) return delta;
  json calls = json::array();
  for (const CallDelta& c : d.calls) {
    if (c.opens)
      calls.push_back({{"index", c.index}, {"id", c.id}, {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    else
      calls.push_back({{"index", c.index}, {"function", {{"arguments", c.arguments}}}});
  }
  delta["tool_calls"] = std::move(calls);
  return delta;
}

json usage_json(const Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  // Only for a request with a (non-empty) prediction: engine/spec/prediction.h.
  if (u.accepted_prediction_tokens + u.rejected_prediction_tokens > 0)
    j["completion_tokens_details"] = {{"accepted_prediction_tokens", u.accepted_prediction_tokens},
                                      {"rejected_prediction_tokens", u.rejected_prediction_tokens}};
  return j;
}

std::string make_response_id(Endpoint endpoint) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl", rng(),
                     static_cast<uint32_t>(rng()));
}

CompletionFormatter::CompletionFormatter(ResponseMeta meta)
    : meta_(std::move(meta)), output_(meta_.tools), text_(meta_.echo_text) {}

json CompletionFormatter::take_logprobs() {
  if (meta_.logprobs < 0) return nullptr;
  json out;
  if (meta_.endpoint == Endpoint::ChatCompletions) {
    json content = json::array();
    for (const TokenLogprob& t : pending_) {
      json e = chat_entry(t);
      e["top_logprobs"] = json::array();
      for (const TokenLogprob& a : t.top) e["top_logprobs"].push_back(chat_entry(a));
      content.push_back(std::move(e));
    }
    out = {{"content", std::move(content)}, {"refusal", nullptr}};
  } else {
    json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    for (const TokenLogprob& t : pending_) {
      tokens.push_back(t.piece);
      offsets.push_back(piece_offset_);
      piece_offset_ += static_cast<int64_t>(t.piece.size());
      if (std::isnan(t.logprob)) {  // echo's first prompt token: nothing precedes it
        lps.push_back(nullptr);
        tops.push_back(nullptr);
        continue;
      }
      lps.push_back(t.logprob);
      json top = json::object();
      for (const TokenLogprob& a : t.top) top[a.piece] = a.logprob;
      top[t.piece] = t.logprob;
      tops.push_back(std::move(top));
    }
    out = {{"tokens", std::move(tokens)},
           {"token_logprobs", std::move(lps)},
           {"top_logprobs", std::move(tops)},
           {"text_offset", std::move(offsets)}};
  }
  pending_.clear();
  return out;
}

std::string CompletionFormatter::chunk(const std::string& text, const char* finish_reason,
                                       const GenerationEvent* last, const json* delta) {
  const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
  json choice = {{"index", meta_.index}, {"logprobs", take_logprobs()},
                 {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
  if (chat) {
    choice["delta"] = finish_reason ? json::object() : delta ? *delta : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  json c = {{"id", meta_.id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", meta_.created},
            {"model", meta_.model},
            {"choices", json::array({choice})}};
  if (meta_.include_usage) c["usage"] = nullptr;
  if (last) c["timings"] = timings_json(*last);
  return sse_event(dump(c));
}

std::string CompletionFormatter::stream_preamble() const {
  if (!meta_.stream || meta_.endpoint != Endpoint::ChatCompletions) return {};
  json choice = {{"index", meta_.index}, {"logprobs", nullptr}, {"finish_reason", nullptr},
                 {"delta", {{"role", "assistant"}, {"content", ""}}}};
  json c = {{"id", meta_.id},           {"object", "chat.completion.chunk"}, {"created", meta_.created},
            {"model", meta_.model},     {"choices", json::array({choice})}};
  if (meta_.include_usage) c["usage"] = nullptr;
  return sse_event(dump(c));
}

json chat_message(const OutputMessage& m) {
  json msg = {{"role", "assistant"}};
  msg["content"] = m.text.empty() && !m.calls.empty() ? json() : json(m.text);
  if (m.calls.empty()) return msg;
  json calls = json::array();
  for (const OutputCall& c : m.calls)
    calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  msg["tool_calls"] = std::move(calls);
  return msg;
}

std::string CompletionFormatter::on_event(const GenerationEvent& ev) {
  const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
  pending_.insert(pending_.end(), ev.prompt_logprobs.begin(), ev.prompt_logprobs.end());
  if (ev.logprob) pending_.push_back(*ev.logprob);
  // With tools the text goes through the tool-call parser, streaming or not.
  const OutputDelta delta = output_.on_event(ev);
  const char* finish = ev.done ? finish_name(ev.finish) : nullptr;
  if (ev.done && output_.end() == OutputEnd::ToolCalls) finish = "tool_calls";
  if (meta_.stream) {
    std::string out;
    if (output_.has_tools()) {
      if (!delta.empty()) {
        const json d = chat_delta(delta);
        out += chunk("", nullptr, nullptr, &d);
      }
    } else if (!ev.text.empty()) {
      out += chunk(ev.text, nullptr, nullptr);
    }
    if (!ev.done) return out;
    if (ev.finish == FinishReason::Error) {
      out += sse_event(error_payload(ev));
    } else {
      out += chunk("", finish, &ev);
      if (meta_.include_usage && !meta_.partial) {
        json u = {{"id", meta_.id},       {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", meta_.created}, {"model", meta_.model},
                  {"choices", json::array()}, {"usage", usage_json(ev.usage)}};
        out += sse_event(dump(u));
      }
    }
    if (!meta_.partial) out += kSseDone;
    return out;
  }

  text_ += ev.text;
  if (!ev.done) return {};
  if (ev.finish == FinishReason::Error) {
    status_ = generation_error(ev).status;
    return error_payload(ev);
  }
  json choice = {{"index", meta_.index}, {"logprobs", take_logprobs()}, {"finish_reason", finish}};
  if (output_.has_tools()) {
    choice["message"] = chat_message(output_.message());
  } else if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  } else {
    choice["text"] = text_;
  }
  json body = {{"id", meta_.id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", meta_.created},
               {"model", meta_.model},
               {"choices", json::array({choice})},
               {"usage", usage_json(ev.usage)},
               {"timings", timings_json(ev)}};
  return dump(body);
}

}  // namespace nexus::server
