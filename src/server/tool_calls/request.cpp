#include "server/tool_calls/request.h"

#include <nlohmann/json.hpp>

#include "util/json_depth.h"

namespace nexus::server::tool_calls {

namespace {

bool renders_tools(const ChatTemplate& t) { return t.source().find("tools") != std::string::npos; }

std::string tools_prompt(const ToolRequest& req) {
  std::string s = "You can call these tools. Their parameters are JSON schemas:\n";
  for (const ToolDefinition& d : req.tools) {
    nlohmann::ordered_json j = {{"name", d.name}, {"description", d.description}, {"parameters", d.parameters}};
    s += j.dump() + "\n";
  }
  s += "To call tools, reply with only this JSON: {\"tool_calls\": [{\"name\": <tool name>, \"arguments\": "
       "<arguments object>}]}";
  return s;
}

// An assistant turn's calls in the Generic syntax.
std::string generic_calls(const nlohmann::ordered_json& calls) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& c : calls) {
    const auto& f = c.at("function");
    nlohmann::ordered_json args = f.contains("arguments") ? f.at("arguments") : nlohmann::ordered_json::object();
    if (args.is_string()) {
      auto parsed = parse_json_bounded_or_discarded<nlohmann::ordered_json>(args.get<std::string>());
      if (!parsed.is_discarded()) args = std::move(parsed);
    }
    list.push_back({{"name", f.at("name")}, {"arguments", std::move(args)}});
  }
  return nlohmann::ordered_json{{"tool_calls", std::move(list)}}.dump();
}

}  // namespace

ToolSyntax syntax_for(const ChatTemplate& t) { return detect_syntax(t.source()); }

std::vector<ChatMessage> prompt_messages(const std::vector<ChatMessage>& messages, const ToolRequest& req,
                                         const ChatTemplate& t) {
  if (req.template_tools.is_null() || syntax_for(t) != ToolSyntax::Generic || renders_tools(t)) return messages;
  std::vector<ChatMessage> out;
  out.reserve(messages.size() + 1);
  const std::string prompt = tools_prompt(req);
  if (messages.empty() || messages.front().role != "system") {
    ChatMessage sys;
    sys.role = "system";
    sys.content = prompt;
    out.push_back(std::move(sys));
  }
  for (const ChatMessage& m : messages) {
    ChatMessage c = m;
    if (&m == &messages.front() && m.role == "system") c.content += (c.content.empty() ? "" : "\n\n") + prompt;
    if (m.role == "assistant" && m.tool_calls.is_array() && !m.tool_calls.empty()) {
      c.content += (c.content.empty() ? "" : "\n") + generic_calls(m.tool_calls);
      c.tool_calls = nullptr;
    }
    if (m.role == "tool" && !t.is_plain()) {
      c.role = "user";
      c.content = "Tool result (" + m.tool_call_id + "): " + m.content;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::shared_ptr<const ToolCallSetup> response_setup(const ToolRequest& req, const Backend& backend) {
  if (!req.active()) return nullptr;
  auto s = std::make_shared<ToolCallSetup>();
  s->parser.syntax = syntax_for(backend.chat_template());
  for (const ToolDefinition& d : req.tools) s->parser.names.push_back(d.name);
  if (!req.parallel || req.choice == ToolChoice::Named) s->parser.max_calls = 1;  // as the grammar allows
  s->forced = req.forced();
  const std::string_view mk = marker(s->parser.syntax);
  if (!mk.empty()) s->marker_token = backend.control_token(mk);
  return s;
}

}  // namespace nexus::server::tool_calls
