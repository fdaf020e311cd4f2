// Tool calls in a chat completion's response (OpenAI's API reference, "The
// chat completion object" and "The chat completion chunk object").
//
// Every piece of generated text goes through feed() (streaming or not); the
// text is parsed again as a whole each time (parser.h) and what the new
// parse adds to the last one becomes one `delta`:
//   {"content": "..."}                      text that cannot start a call
//   {"tool_calls": [{"index": i, "id": "call_…", "type": "function",
//     "function": {"name": N, "arguments": "<what is known>"}}]}
//                                           the first delta of call i
//   {"tool_calls": [{"index": i, "function": {"arguments": "<more>"}}]}
//                                           later deltas of call i
// (content and several calls may share one delta when one event carries
// several tokens). The concatenated deltas equal message() exactly.
// message(): {"role": "assistant", "content": text | null (when there are
// calls and no text), "tool_calls": [{"id", "type": "function", "function":
// {"name", "arguments"}}]} (tool_calls only when there are calls).
// finish_reason: "tool_calls" replaces "stop" when the output holds calls.
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

#include <nlohmann/json.hpp>

#include "server/tool_calls/parser.h"

namespace nexus::server::tool_calls {

struct ToolCallSetup {
  ParserOptions parser;
  int32_t marker_token = -1;  // the control token standing for the marker, -1 when none
};

class ToolCallStream {
 public:
  explicit ToolCallStream(std::shared_ptr<const ToolCallSetup> setup);

  // The delta for `text` (the event's text) and `token` (its sampled id);
  // null when nothing can be said yet.
  nlohmann::json feed(std::string_view text, int32_t token);
  // At the end of the output: the last delta (null when none).
  nlohmann::json finish();

  nlohmann::json message() const;  // after finish()
  bool has_calls() const { return !sent_.calls.empty(); }

 private:
  nlohmann::json advance(bool final);
  std::string new_id();

  std::shared_ptr<const ToolCallSetup> setup_;
  std::string text_;
  ParsedMessage sent_;  // what the deltas so far add up to
  std::vector<std::string> ids_;
  std::mt19937_64 rng_;
};

}  // namespace nexus::server::tool_calls
