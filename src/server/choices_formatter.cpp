#include "server/choices_formatter.h"

#include <nlohmann/json.hpp>

#include "server/sse.h"
#include "util/error.h"

namespace nexus::server {

using nlohmann::json;

ChoicesFormatter::ChoicesFormatter(ResponseMeta meta, int32_t n) : meta_(std::move(meta)) {
  if (n < 1) throw Error("ChoicesFormatter: n must be >= 1");
  for (int32_t i = 0; i < n; ++i) {
    ResponseMeta m = meta_;
    m.index = i;
    m.partial = n > 1;
    choices_.push_back(std::make_unique<CompletionFormatter>(std::move(m)));
  }
  bodies_.resize(static_cast<size_t>(n));
  done_.assign(static_cast<size_t>(n), false);
}

HttpReply ChoicesFormatter::error_reply(const ApiError& e) const { return server::error_reply(e); }

std::string ChoicesFormatter::stream_error(const ApiError& e) const {
  return sse_event(error_body(e)) + std::string(kSseDone);
}

std::string ChoicesFormatter::stream_preamble() {
  std::string out;
  for (const auto& c : choices_) out += c->stream_preamble();
  return out;
}

std::string ChoicesFormatter::on_event(const GenerationEvent& ev, int32_t index) {
  if (finished_ || index < 0 || index >= n() || done_[static_cast<size_t>(index)]) return {};
  CompletionFormatter& f = *choices_[static_cast<size_t>(index)];
  std::string out = f.on_event(ev);
  if (!ev.done) return out;
  done_[static_cast<size_t>(index)] = true;
  ++n_done_;
  if (n() == 1) {
    finished_ = true;
    status_ = f.status();
    return out;
  }
  if (index == 0) {
    usage_.prompt_tokens = ev.usage.prompt_tokens;
    usage_.cached_tokens = ev.usage.cached_tokens;
  }
  usage_.completion_tokens += ev.usage.completion_tokens;
  usage_.accepted_prediction_tokens += ev.usage.accepted_prediction_tokens;
  usage_.rejected_prediction_tokens += ev.usage.rejected_prediction_tokens;
  if (ev.finish == FinishReason::Error) {
    finished_ = true;
    if (!meta_.stream) status_ = f.status();
    return meta_.stream ? out + std::string(kSseDone) : out;  // the error event / the 500 body
  }
  if (!meta_.stream) bodies_[static_cast<size_t>(index)] = std::move(out);
  if (n_done_ < n()) return meta_.stream ? out : std::string();
  finished_ = true;
  if (!meta_.stream) return merged_body();
  if (meta_.include_usage) {
    const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
    const json u = {{"id", meta_.id},           {"object", chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", meta_.created}, {"model", meta_.model},
                    {"choices", json::array()}, {"usage", usage_json(usage_)}};
    out += sse_event(u.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  return out + std::string(kSseDone);
}

std::string ChoicesFormatter::merged_body() const {
  json body = json::parse(bodies_[0]);
  json choices = json::array();
  for (const std::string& b : bodies_) choices.push_back(json::parse(b).at("choices").at(0));
  body["choices"] = std::move(choices);
  body["usage"] = usage_json(usage_);
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace nexus::server
