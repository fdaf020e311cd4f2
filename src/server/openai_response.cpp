#include "server/openai_response.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
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

// Two deltas of one event as one (tool_calls/stream.h): contents joined,
// entries of the same call joined.
json merge_deltas(json a, const json& b) {
  if (b.contains("content")) a["content"] = a.value("content", std::string()) + b["content"].get<std::string>();
  if (!b.contains("tool_calls")) return a;
  json& calls = a["tool_calls"];
  if (!calls.is_array()) calls = json::array();
  for (const json& e : b["tool_calls"]) {
    auto same = std::find_if(calls.begin(), calls.end(), [&](const json& c) { return c["index"] == e["index"]; });
    if (same == calls.end()) { calls.push_back(e); continue; }
    auto& f = (*same)["function"];
    f["arguments"] = f.value("arguments", std::string()) + e["function"]["arguments"].get<std::string>();
  }
  return a;
}

// A failed generation: the request's fault (GenerationEvent::error_code) is a
// 400 naming it, anything else a 500.
ApiError generation_error(const GenerationEvent& ev) {
  if (!ev.error_code.empty()) return bad_request("The request cannot be followed: " + ev.error, "", ev.error_code);
  return ApiError(500, "generation failed: " + ev.error, "", "", "server_error");
}

std::string error_payload(const GenerationEvent& ev) { return error_body(generation_error(ev)); }

}  // namespace

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

CompletionFormatter::CompletionFormatter(ResponseMeta meta) : meta_(std::move(meta)), text_(meta_.echo_text) {
  if (meta_.tools) tool_stream_ = std::make_unique<tool_calls::ToolCallStream>(meta_.tools);
}

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

std::string CompletionFormatter::on_event(const GenerationEvent& ev) {
  const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
  pending_.insert(pending_.end(), ev.prompt_logprobs.begin(), ev.prompt_logprobs.end());
  if (ev.logprob) pending_.push_back(*ev.logprob);
  // With tools the text goes through the tool-call parser, streaming or not.
  json delta;
  if (tool_stream_) {
    delta = tool_stream_->feed(ev.text, ev.token);
    if (ev.done && ev.finish != FinishReason::Error) {
      json last = tool_stream_->finish();
      if (delta.is_null()) delta = std::move(last);
      else if (!last.is_null()) delta = merge_deltas(std::move(delta), last);
    }
  }
  const char* finish = ev.done ? finish_name(ev.finish) : nullptr;
  if (tool_stream_ && tool_stream_->has_calls() && ev.finish == FinishReason::Stop) finish = "tool_calls";
  if (meta_.stream) {
    std::string out;
    if (tool_stream_) {
      if (!delta.is_null()) out += chunk("", nullptr, nullptr, &delta);
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
  if (tool_stream_) {
    choice["message"] = tool_stream_->message();
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
