#include "server/tool_calls/syntax.h"

namespace nexus::server::tool_calls {

const char* syntax_name(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::Hermes: return "hermes";
    case ToolSyntax::Llama3: return "llama3";
    case ToolSyntax::Mistral: return "mistral";
    case ToolSyntax::Generic: break;
  }
  return "generic";
}

ToolSyntax detect_syntax(std::string_view src) {
  const auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<tool_call>")) return ToolSyntax::Hermes;
  if (has("[TOOL_CALLS]")) return ToolSyntax::Mistral;
  if (has("<|start_header_id|>") && (has("<|python_tag|>") || has("\"parameters\""))) return ToolSyntax::Llama3;
  return ToolSyntax::Generic;
}

std::string_view marker(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::Hermes: return "<tool_call>";
    case ToolSyntax::Llama3: return "<|python_tag|>";
    case ToolSyntax::Mistral: return "[TOOL_CALLS]";
    case ToolSyntax::Generic: break;
  }
  return "";
}

std::string_view arguments_key(ToolSyntax s) { return s == ToolSyntax::Llama3 ? "parameters" : "arguments"; }

}  // namespace nexus::server::tool_calls
