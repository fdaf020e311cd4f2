// The grammar that forces tool calls (tool_choice "required" or a named
// function): the output is one call, or with parallel_tool_calls several,
// in the family's syntax (syntax.h), each call's arguments valid against
// its tool's parameters schema (grammar/json_schema.h, compiled here with
// the rule names of each tool prefixed). Written as the syntax's canonical
// text, e.g. for Hermes:
//   <tool_call>\n{"name": "get_weather", "arguments": {...}}\n</tool_call>
// (Mistral's [TOOL_CALLS] and Llama's calls are written as text: a grammar
// never allows control tokens; the parser reads the text either way.)
// Throws ApiError 400 naming tools[i].function.parameters when a schema
// does not compile (parse_tools already checked them).
#pragma once

#include <memory>
#include <string>

#include "grammar/grammar.h"
#include "server/openai_tools.h"
#include "server/tool_calls/syntax.h"

namespace nexus::server::tool_calls {

// The GBNF text (for tests and messages).
std::string forced_gbnf(const ToolRequest& req, ToolSyntax syntax);

std::shared_ptr<const grammar::Grammar> forced_grammar(const ToolRequest& req, ToolSyntax syntax);

}  // namespace nexus::server::tool_calls
