#include "gateway/stream_usage.h"

#include <nlohmann/json.hpp>

#include "util/json_depth.h"

namespace nexus::gateway {

namespace {

std::optional<TokenUsage> usage_in(const nlohmann::json& doc) {
  if (!doc.is_object()) return std::nullopt;
  auto u = doc.find("usage");
  if (u == doc.end() || !u->is_object()) {
    // The Responses API's final events carry it in their response object.
    const auto r = doc.find("response");
    if (r == doc.end() || !r->is_object()) return std::nullopt;
    u = r->find("usage");
    if (u == r->end() || !u->is_object()) return std::nullopt;
  }
  TokenUsage t;
  const auto count = [&](const char* name) -> int64_t {
    const auto v = u->find(name);
    return v != u->end() && v->is_number_integer() ? v->get<int64_t>() : 0;
  };
  // OpenAI chat and completions; the Responses API and Anthropic's Messages
  // name them input/output tokens (Anthropic's input_tokens leave out the
  // prompt tokens read from or written to its cache, counted beside them).
  t.prompt_tokens = count("prompt_tokens") + count("input_tokens") + count("cache_read_input_tokens") +
                    count("cache_creation_input_tokens");
  t.completion_tokens = count("completion_tokens") + count("output_tokens");
  return t;
}

}  // namespace

std::optional<TokenUsage> usage_of_body(std::string_view body) {
  return usage_in(parse_json_bounded_or_discarded(body));
}

std::optional<StreamUsageRequest> with_stream_usage(nlohmann::ordered_json& doc) {
  // ordered_json: the body goes on with its fields in the client's order.
  if (!doc.is_object()) return std::nullopt;  // not JSON: the replica answers 400
  const auto s = doc.find("stream");
  if (s == doc.end() || !s->is_boolean() || !s->get<bool>()) return std::nullopt;
  StreamUsageRequest r;
  auto so = doc.find("stream_options");
  if (so != doc.end() && !so->is_null()) {
    if (!so->is_object()) return std::nullopt;  // the replica refuses it by name
    const auto iu = so->find("include_usage");
    r.client_asked = iu != so->end() && iu->is_boolean() && iu->get<bool>();
    (*so)["include_usage"] = true;
  } else {
    doc["stream_options"] = {{"include_usage", true}};
  }
  r.body = doc.dump();
  return r;
}

std::string StreamUsageTap::feed(std::string_view bytes) {
  if (overflowed_) return {};
  held_.append(bytes);
  std::string out;
  size_t start = 0;
  // (From one byte back: the blank line may straddle two reads.)
  size_t from = scanned_ > 0 ? scanned_ - 1 : 0;
  for (size_t end; (end = held_.find("\n\n", from)) != std::string::npos; start = from = end + 2)
    out += event(std::string_view(held_).substr(start, end + 2 - start));
  held_.erase(0, start);
  scanned_ = held_.size();
  if (held_.size() > max_event_) {
    overflowed_ = true;
    std::string().swap(held_);
    scanned_ = 0;
  }
  return out;
}

std::string StreamUsageTap::flush() {
  std::string rest;
  rest.swap(held_);
  scanned_ = 0;
  return rest;
}

std::string StreamUsageTap::event(std::string_view ev) {
  // The data line opens the event, or follows its `event:` line (the
  // Responses and Messages APIs name their events).
  size_t at = 0;
  if (ev.starts_with("event:")) {
    const size_t nl = ev.find('\n');
    if (nl == std::string_view::npos || nl + 2 >= ev.size()) return std::string(ev);
    at = nl + 1;
  }
  constexpr std::string_view data = "data: {";
  if (!ev.substr(at).starts_with(data)) return std::string(ev);
  const std::string_view payload = ev.substr(at + 6, ev.size() - at - 8);  // without "data: " and "\n\n"
  if (payload.find("\"usage\":{") != std::string_view::npos) {
    const auto doc = parse_json_bounded_or_discarded(payload);
    if (auto u = usage_in(doc)) {
      usage_ = u;
      const auto c = doc.find("choices");
      if (strip_ && c != doc.end() && c->is_array() && c->empty()) return {};
    }
    return std::string(ev);
  }
  constexpr std::string_view null_usage = ",\"usage\":null}";
  if (strip_ && payload.ends_with(null_usage)) {
    std::string out(ev.substr(0, ev.size() - 2 - null_usage.size()));
    out += "}\n\n";
    return out;
  }
  return std::string(ev);
}

}  // namespace nexus::gateway
