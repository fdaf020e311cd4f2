#include "server/realtime_protocol.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/prompt_builder.h"

namespace nexus::server::realtime {

using nlohmann::json;

namespace {

// The <sampling> keys (checked by parse_openai_request) and the protocol's own.
constexpr std::array<std::string_view, 13> kSamplingKeys{
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "frequency_penalty",
    "presence_penalty", "seed", "stop", "ignore_eos", "priority"};

bool is_sampling_key(std::string_view k) {
  for (std::string_view s : kSamplingKeys)
    if (s == k) return true;
  return false;
}

}  // namespace

ResolvedParams resolve_params(const json& session, const json& overrides, const std::string& model_id,
                              int32_t n_ctx, int32_t max_priority) {
  ResolvedParams out;
  // A completions body made of the sampling fields: parse_openai_request is the
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
    out.request = parse_openai_request(Endpoint::Completions, body.dump(), max_priority);
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

}  // namespace nexus::server::realtime
