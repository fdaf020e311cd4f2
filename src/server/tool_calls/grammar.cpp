#include "server/tool_calls/grammar.h"

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "util/error.h"

namespace nexus::server::tool_calls {

namespace {

// A GBNF literal; tool names are [a-zA-Z0-9_-], so only the JSON quotes
// and the newlines of the syntax need escapes.
std::string lit(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string forced_gbnf(const ToolRequest& req, ToolSyntax syntax) {
  std::string rules, alternatives;
  for (size_t i = 0; i < req.tools.size(); ++i) {
    const ToolDefinition& t = req.tools[i];
    if (req.choice == ToolChoice::Named && t.name != req.named) continue;
    grammar::SchemaRules s;
    try {
      s = grammar::json_schema_rules(t.parameters, fmt::format("t{}-", i));
    } catch (const Error& e) {
      const std::string param = fmt::format("tools[{}].function.parameters", i);
      throw bad_request(fmt::format("Invalid '{}': {}", param, printable(e.what())), param, "invalid_value");
    }
    const std::string head = fmt::format("{{\"name\": \"{}\", \"{}\": ", t.name, arguments_key(syntax));
    rules += fmt::format("t{}-call ::= {} {} \"}}\"\n{}", i, lit(head), s.top, s.rules);
    alternatives += fmt::format("{}t{}-call", alternatives.empty() ? "" : " | ", i);
  }
  // A named choice asks for that call, once (a weak model would otherwise
  // repeat it until max_tokens); parallel_tool_calls false for one call too.
  const bool many = req.parallel && req.choice != ToolChoice::Named;
  std::string root;
  const auto list = [&](std::string_view open, std::string_view sep, std::string_view close) {
    return fmt::format("root ::= {} call {} {}\n", lit(open), many ? fmt::format("( {} call )*", lit(sep)) : "",
                       lit(close));
  };
  switch (syntax) {
    case ToolSyntax::Hermes:
      root = fmt::format("root ::= one {}\none ::= {} call {}\n", many ? "( \"\\n\" one )*" : "",
                         lit("<tool_call>\n"), lit("\n</tool_call>"));
      break;
    case ToolSyntax::Llama3:
      root = fmt::format("root ::= call {}\n", many ? "( \"; \" call )*" : "");
      break;
    case ToolSyntax::Mistral: root = list("[TOOL_CALLS][", ", ", "]"); break;
    case ToolSyntax::Generic: root = list("{\"tool_calls\": [", ", ", "]}"); break;
  }
  // The arguments compact, as OpenAI's strict mode writes them: no free
  // whitespace between tokens (a weak model under a forced call otherwise
  // spends its tokens on newlines and indentation).
  return fmt::format("{}call ::= {}\n{}{}", root, alternatives, rules, grammar::json_schema_base_gbnf(/*compact=*/true));
}

std::shared_ptr<const grammar::Grammar> forced_grammar(const ToolRequest& req, ToolSyntax syntax) {
  const std::string text = forced_gbnf(req, syntax);
  try {
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(text));
  } catch (const Error& e) {
    throw bad_request(fmt::format("Invalid 'tools': the tools' grammar: {}", printable(e.what())), "tools",
                      "invalid_value");
  }
}

}  // namespace nexus::server::tool_calls
