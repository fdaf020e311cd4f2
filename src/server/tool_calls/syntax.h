// Tool-call syntaxes: how a chat model family writes a call to a tool in its
// output, detected from the model's chat template (the template that renders
// `tools` also teaches the model the syntax it was trained on).
//
//   Hermes   Hermes 2 Pro, Qwen 2.5 / Qwen 3, and templates that mention
//            "<tool_call>":  <tool_call>{"name": N, "arguments": {...}}</tool_call>
//            anywhere in the output, one block per call.
//   Llama3   Llama 3.1 / 3.2 / 3.3 (template with <|start_header_id|> and
//            <|python_tag|> or "parameters"): the whole message is
//            [<|python_tag|>] {"name": N, "parameters": {...}} (several
//            separated by ";").
//   Mistral  templates that mention "[TOOL_CALLS]":
//            [TOOL_CALLS] [{"name": N, "arguments": {...}}, ...] anywhere.
//   Generic  every other template and the plain fallback (Nexus's own
//            format, docs/server.md "Tool calling"): the whole message is
//            {"tool_calls": [{"name": N, "arguments": {...}}, ...]}.
// In every syntax a call object may carry its keys in any order, "arguments"
// and "parameters" are synonyms, other keys ("id", "type") are ignored.
#pragma once

#include <string>
#include <string_view>

namespace nexus::server::tool_calls {

enum class ToolSyntax { Hermes, Llama3, Mistral, Generic };

const char* syntax_name(ToolSyntax s);  // "hermes", "llama3", "mistral", "generic"

// From the chat template's source ("" for the plain fallback: Generic).
ToolSyntax detect_syntax(std::string_view template_source);

// The text that opens the calls: "<tool_call>", "<|python_tag|>" (optional
// for Llama3), "[TOOL_CALLS]", or "" (Generic). A vocabulary may hold it as
// a control token, whose text the output leaves out (tool_calls/stream.h).
std::string_view marker(ToolSyntax s);

// The key the syntax writes a call's arguments under ("arguments", or
// "parameters" for Llama3).
std::string_view arguments_key(ToolSyntax s);

}  // namespace nexus::server::tool_calls
