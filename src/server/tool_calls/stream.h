// Tool calls in a model's output, as the output streams (every protocol's
// tool calls: OpenAI chat and Responses, Anthropic Messages; server/core/output.h).
//
// Every piece of generated text goes through feed() (streaming or not); the
// text is parsed again as a whole each time (parser.h) and what the new
// parse adds to the last one becomes one OutputDelta: text that cannot start
// a call, the first piece of call i (`opens`: its id and name, and the
// arguments known so far), or more of call i's arguments. The concatenated
// deltas equal message() exactly.
//
// Ids: "call_" + 24 random letters and digits; Mistral's templates require
// exactly 9 letters and digits, so with that syntax ids are 9 of them.
// A vocabulary that holds the syntax's marker as a control token (Mistral's
// [TOOL_CALLS], Llama's <|python_tag|>) leaves it out of the text; feed()
// puts the marker's text back when that token is sampled (marker_token).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "server/core/output.h"
#include "server/tool_calls/parser.h"

namespace nexus::server::tool_calls {

struct ToolCallSetup {
  ParserOptions parser;
  int32_t marker_token = -1;  // the control token standing for the marker, -1 when none
  // The grammar forces calls (tool_choice required / named): the output is
  // call syntax only, so text the parser gives up on is a call cut short
  // (max_tokens), never an answer (core/output.h drops it).
  bool forced = false;
};

class ToolCallStream {
 public:
  explicit ToolCallStream(std::shared_ptr<const ToolCallSetup> setup);

  // The delta for `text` (the event's text) and `token` (its sampled id);
  // empty when nothing can be said yet.
  OutputDelta feed(std::string_view text, int32_t token);
  // At the end of the output: the last delta (empty when none).
  OutputDelta finish();

  OutputMessage message() const;  // after finish()
  bool has_calls() const { return !sent_.calls.empty(); }

 private:
  OutputDelta advance(bool final);
  std::string new_id();

  std::shared_ptr<const ToolCallSetup> setup_;
  std::string text_;
  ParsedMessage sent_;  // what the deltas so far add up to
  std::vector<std::string> ids_;
  std::mt19937_64 rng_;
};

}  // namespace nexus::server::tool_calls
