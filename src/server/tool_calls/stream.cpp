#include "server/tool_calls/stream.h"

namespace nexus::server::tool_calls {

ToolCallStream::ToolCallStream(std::shared_ptr<const ToolCallSetup> setup)
    : setup_(std::move(setup)), rng_(std::random_device{}()) {}

std::string ToolCallStream::new_id() {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const bool mistral = setup_->parser.syntax == ToolSyntax::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng_() % (sizeof(kAlnum) - 1)];
  return id;
}

OutputDelta ToolCallStream::feed(std::string_view text, int32_t token) {
  text_ += text;
  if (token >= 0 && token == setup_->marker_token) text_ += marker(setup_->parser.syntax);
  return advance(false);
}

OutputDelta ToolCallStream::finish() { return advance(true); }

OutputDelta ToolCallStream::advance(bool final) {
  const ParsedMessage now = parse_output(text_, final, setup_->parser);
  OutputDelta delta;
  // The parse only grows (parser.h); a shorter one would be a parser bug,
  // and is then never sent backwards.
  if (now.content.size() > sent_.content.size()) {
    delta.text = now.content.substr(sent_.content.size());
    sent_.content = now.content;
  }
  for (size_t i = 0; i < now.calls.size(); ++i) {
    const ParsedCall& c = now.calls[i];
    if (i >= sent_.calls.size()) {
      ids_.push_back(new_id());
      delta.calls.push_back({i, true, ids_[i], c.name, c.arguments});
      sent_.calls.push_back(c);
      continue;
    }
    ParsedCall& s = sent_.calls[i];
    if (c.arguments.size() > s.arguments.size()) {
      delta.calls.push_back({i, false, "", "", c.arguments.substr(s.arguments.size())});
      s.arguments = c.arguments;
    }
    s.complete = c.complete;
  }
  return delta;
}

OutputMessage ToolCallStream::message() const {
  OutputMessage m;
  m.text = sent_.content;
  for (size_t i = 0; i < sent_.calls.size(); ++i)
    m.calls.push_back({ids_[i], sent_.calls[i].name, sent_.calls[i].arguments, sent_.calls[i].complete});
  return m;
}

}  // namespace nexus::server::tool_calls
