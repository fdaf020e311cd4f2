// The tool calls in a model's output, parsed per syntax (syntax.h).
//
// parse_output() reads the output so far. With final = false it reports
// only what no continuation can change: content stops before anything that
// may still become a call (a partial "<tool_call>", a message that so far
// reads `{"na`), a call appears once its name is known, and its arguments
// are the JSON text the model has written of them so far. So for every
// prefix p of a text t, parse(p, false) is a prefix of parse(t, final) (the
// content, the list of calls, each call's name and arguments): a stream of
// the differences between successive parses (tool_calls/stream.h)
// reassembles exactly to the parse of the whole output, however the text
// was cut.
//
// Rules (the same whatever the cuts):
//  - a call needs a "name" that is one of `names` (else it is not a call:
//    its text is content); "arguments" (or "parameters") is copied as the
//    model wrote it (an object's JSON text); a string value is decoded (a
//    model that writes the arguments as a JSON string); none gives "{}";
//  - whitespace between content and calls is dropped; a message without
//    calls is its text, unchanged;
//  - output that stops being a call after one began (e.g. a broken closing
//    tag) leaves the calls parsed so far and the rest of the text becomes
//    content; a call cut short by the end of the output (max_tokens) keeps
//    the arguments written so far (complete = false);
//  - calls past max_calls (parallel_tool_calls = false) are dropped.
// Scanning is iterative (no recursion on nesting) and linear in the text.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls/syntax.h"

namespace nexus::server::tool_calls {

struct ParsedCall {
  std::string name;
  std::string arguments;  // JSON text (as written; "" until the model wrote some)
  bool complete = false;  // the call's closing brace was seen
};

struct ParsedMessage {
  std::string content;
  std::vector<ParsedCall> calls;
};

struct ParserOptions {
  ToolSyntax syntax = ToolSyntax::Generic;
  std::vector<std::string> names;  // the tools' function names
  size_t max_calls = std::numeric_limits<size_t>::max();
};

ParsedMessage parse_output(std::string_view text, bool final, const ParserOptions& opts);

}  // namespace nexus::server::tool_calls
