// The tool-calling fields of POST /v1/chat/completions (OpenAI's API
// reference, "Create chat completion"): tools, tool_choice,
// parallel_tool_calls. Parsed here, used by the prompt (the chat template
// renders `tools`), the grammar that forces calls (tool_calls/grammar.h) and
// the response (tool_calls/stream.h).
//
//   tools                [{"type": "function", "function": {"name",
//                        "description"?, "parameters"?, "strict"?}}];
//                        name matches [a-zA-Z0-9_-]{1,64} and is unique;
//                        parameters is a JSON schema (grammar/json_schema.h
//                        subset; absent: an object without properties)
//   tool_choice          "auto" (default with tools) | "none" (default
//                        without) | "required" | {"type": "function",
//                        "function": {"name": N}}
//   parallel_tool_calls  bool (default true): false allows at most one call
// Errors: ApiError 400 invalid_request_error naming the field, e.g.
// `tools[1].function.parameters` for a schema the compiler refuses (with its
// message), `tools[0].function.name`, `tool_choice` (an unknown mode, a
// name that is not among the tools, required/named without tools, or a
// forced choice combined with response_format/grammar, which constrain the
// same output). Unknown keys inside a tool are refused by name.
// On /v1/completions these fields are refused (unsupported_parameter).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nexus::server {

enum class ToolChoice { Auto, None, Required, Named };

struct ToolDefinition {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // the schema (an object schema when absent)
};

struct ToolRequest {
  std::vector<ToolDefinition> tools;
  nlohmann::ordered_json template_tools;  // `tools` as sent (for the chat template); null when none
  ToolChoice choice = ToolChoice::None;
  std::string named;         // ToolChoice::Named: the function
  bool parallel = true;      // parallel_tool_calls

  // The output is parsed for calls (tools given, choice not none).
  bool active() const { return !tools.empty() && choice != ToolChoice::None; }
  // A call is forced through the grammar (required or named).
  bool forced() const { return active() && (choice == ToolChoice::Required || choice == ToolChoice::Named); }
};

// The pieces every protocol's tool parser shares (Responses' and
// Anthropic's tools have the same three parts in other places):
// a definition from its name, description and parameter schema (JSON
// values, null when absent), errors naming `where`.name, `where`.description
// and `where`.`parameters_key`; with `compile` the schema must compile to a
// grammar now (chat completions' rule), else only when a forced choice needs
// it (tool_calls/grammar.h: Responses and Messages, whose agent clients send
// schemas with keywords the compiler refuses, such as allOf or format uri,
// for tools the model is merely told about);
ToolDefinition checked_tool(const nlohmann::ordered_json* name, const nlohmann::ordered_json* description,
                            const nlohmann::ordered_json* parameters, const std::string& where,
                            const char* parameters_key, bool compile = true);
// `d` added to `r.tools` (400 naming `where`.name when the name is taken);
void add_tool(ToolRequest& r, ToolDefinition d, const std::string& where);
// the choice against the tools: required/named without tools, a name not
// among them, a forced choice with a grammar (400 naming `param`);
void check_choice(const ToolRequest& r, bool has_grammar, const std::string& param);
// the tools as a chat template expects them (transformers' convention,
// chat_template.h): [{"type": "function", "function": {"name",
// "description"?, "parameters"}}].
nlohmann::ordered_json template_tools(const std::vector<ToolDefinition>& tools);

// `body` is the parsed request, `raw` its text (re-read as ordered_json so
// that schemas keep their property order). `has_grammar`: response_format
// or grammar already constrains the output.
ToolRequest parse_tools(const nlohmann::json& body, std::string_view raw, bool has_grammar);

}  // namespace nexus::server
