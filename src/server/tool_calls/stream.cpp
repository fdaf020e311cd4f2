#include "server/tool_calls/stream.h"

namespace nexus::server::tool_calls {

using nlohmann::json;

ToolCallStream::ToolCallStream(std::shared_ptr<const ToolCallSetup> setup)
    : setup_(std::move(setup)), rng_(std::random_device{}()) {}

std::string ToolCallStream::new_id() {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const bool mistral = setup_->parser.syntax == ToolSyntax::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng_() % (sizeof(kAlnum) - 1)];
  return id;
}

json ToolCallStream::feed(std::string_view text, int32_t token) {
  text_ += text;
  if (token >= 0 && token == setup_->marker_token) text_ += marker(setup_->parser.syntax);
  return advance(false);
}

json ToolCallStream::finish() { return advance(true); }

json ToolCallStream::advance(bool final) {
  const ParsedMessage now = parse_output(text_, final, setup_->parser);
  json delta = json::object();
  // The parse only grows (parser.h); a shorter one would be a parser bug,
  // and is then never sent backwards.
  if (now.content.size() > sent_.content.size()) delta["content"] = now.content.substr(sent_.content.size());
  json calls = json::array();
  for (size_t i = 0; i < now.calls.size(); ++i) {
    const ParsedCall& c = now.calls[i];
    if (i >= sent_.calls.size()) {
      ids_.push_back(new_id());
      calls.push_back({{"index", i}, {"id", ids_[i]}, {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      sent_.calls.push_back(c);
      continue;
    }
    ParsedCall& s = sent_.calls[i];
    if (c.arguments.size() > s.arguments.size()) {
      calls.push_back({{"index", i}, {"function", {{"arguments", c.arguments.substr(s.arguments.size())}}}});
      s.arguments = c.arguments;
    }
    s.complete = c.complete;
  }
  if (!calls.empty()) delta["tool_calls"] = std::move(calls);
  if (delta.contains("content")) sent_.content = now.content;
  return delta.empty() ? json() : delta;
}

json ToolCallStream::message() const {
  json m = {{"role", "assistant"}};
  m["content"] = sent_.content.empty() && has_calls() ? json() : json(sent_.content);
  if (has_calls()) {
    json calls = json::array();
    for (size_t i = 0; i < sent_.calls.size(); ++i)
      calls.push_back({{"id", ids_[i]}, {"type", "function"},
                       {"function", {{"name", sent_.calls[i].name}, {"arguments", sent_.calls[i].arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

}  // namespace nexus::server::tool_calls
