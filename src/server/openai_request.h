// Parsing and validation of the request bodies of POST /v1/completions and
// POST /v1/chat/completions, following OpenAI's API reference, into the
// neutral ConversationRequest (server/core/conversation_request.h).
//
// This is the one place where request fields are checked: every problem
// becomes an ApiError (HTTP 400, type "invalid_request_error", `param` naming
// the field). Checks that need the model (model id, token ids, context
// length, max_tokens limit) are in prompt_builder.h.
//
// Refused with 400 unsupported_parameter when they ask for something (true,
// non-zero, non-empty; response_format other than {"type":"text"}): functions,
// function_call (the legacy form of tools), suffix; echo on chat; best_of
// other than n; on /v1/completions tools, tool_choice, parallel_tool_calls.
// A client then learns it at once instead of getting an answer without what it asked for.
//
// Accepted fields (null counts as absent; other unknown fields are ignored):
//   model                 string; optional
//   prompt                completions: string | [string] | [int...] | [[int...]]
//   messages              chat: non-empty array of {role, content}; role one of
//                         system, developer (treated as system), user,
//                         assistant, tool; content a string, an array of
//                         {"type":"text","text":...} parts (joined with "\n"),
//                         or null for assistant messages; assistant
//                         tool_calls (array of {id, type, function: {name,
//                         arguments}}), tool tool_call_id and any name
//                         (strings) are passed to the chat template
//   max_tokens            integer (chat: max_completion_tokens wins when both)
//   temperature [0,2]  top_p [0,1]  top_k >= 0  min_p [0,1]
//   frequency_penalty [-2,2]  presence_penalty [-2,2]  repeat_penalty > 0
//   seed                  integer (any sign; used bit-for-bit)
//   stop                  string | array of at most 4 strings ("" ignored)
//   stream                bool;  stream_options.include_usage bool
//   logprobs              chat: bool, with top_logprobs 0..20; completions:
//                         integer 0..5 (alternatives per token)
//   response_format       {"type": "text" | "json_object" | "json_schema"}
//                         (json_object: the output is a JSON object,
//                         grammar/json_schema.h (json_object_gbnf); json_schema: valid against
//                         json_schema.schema, grammar/json_schema.h; an
//                         unsupported keyword is a 400 naming it)
//   grammar               string, GBNF (grammar/gbnf.h; llama.cpp's field);
//                         a grammar error is a 400 naming `grammar`
//   logit_bias            {"<token id>": number in [-100, 100]} (ids checked
//                         against the vocabulary in prompt_builder)
//   n                     1..16 choices (server/choices.h: seeds, KV sharing)
//   echo                  completions: bool; the prompt's text (and, with
//                         logprobs, its tokens' logprobs, the first null)
//                         before the completion; max_tokens may then be 0;
//                         not with stream (400 naming echo); chat: refused
//   best_of               absent or equal to n (else 400 unsupported_value)
//   ignore_eos            bool (llama.cpp extension)
//   tools, tool_choice, parallel_tool_calls
//                         chat: openai_tools.h (function tools with JSON
//                         schema parameters; auto, none, required, named)
//   prediction            {"type": "content", "content": ...} (server/openai_prediction.h)
//   priority              "interactive" | "default" | "batch" | integer in
//                         [-1000, 1000] (Nexus extension; higher runs first,
//                         see engine/scheduler.h), at most the server's cap
//                         (server/request_priority.h: 400 priority_above_cap)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/core/conversation_request.h"
#include "server/request_priority.h"

namespace nexus::server {

// Parses `body` (the raw HTTP body). Throws ApiError(400) on invalid UTF-8,
// malformed JSON, a non-object body, a field of the wrong type or out of
// range, a priority above `max_priority` (the server's cap,
// --max-request-priority), or a missing/empty prompt or messages.
ConversationRequest parse_openai_request(Endpoint endpoint, std::string_view body,
                             int32_t max_priority = kDefaultMaxRequestPriority);

// Strict UTF-8 check (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// A request body as a JSON object, the checks every endpoint makes first:
// 400 invalid_utf8, invalid_json (not JSON, or not an object) or
// nesting_too_deep (past util/json_depth.h's limit, refused while parsing).
nlohmann::json parse_json_body(std::string_view body);

// The pieces the other protocols' parsers share (each throws ApiError 400
// naming the field):
// temperature [0,2], top_p [0,1], top_k, min_p, the penalties, seed,
// ignore_eos (llama.cpp's extension; `nexus bench` sends it);
void parse_sampling(const nlohmann::json& body, ConversationRequest& r);
// `priority` (see above), at most `max_priority`;
int32_t parse_priority(const nlohmann::json& body, int32_t max_priority);
// a JSON schema compiled to the grammar its instances follow (grammar/json_schema.h),
// 400 invalid_value naming `param` for a schema it refuses;
std::shared_ptr<const grammar::Grammar> schema_grammar(const nlohmann::ordered_json& schema, const std::string& param);
// any JSON object (response_format json_object).
std::shared_ptr<const grammar::Grammar> json_object_grammar();

}  // namespace nexus::server
