// POST /v1/responses: the request body (OpenAI's API reference, "Create a
// model response"; the fields Codex CLI sends: docs/notes and
// ../shared/notes/codex-cli-responses.md) -> the neutral conversation
// (ConversationRequest with Endpoint::Responses) and what the response echoes.
//
//   input            a string (one user message) or items:
//                      {"type": "message", "role": system | developer | user
//                       | assistant, "content": string | [{"type":
//                       "input_text" | "output_text", "text"}]} (type may be
//                       left out: EasyInputMessage); developer is system;
//                      {"type": "function_call", "call_id", "name",
//                       "arguments", "id"?, "status"?} (a call the model made:
//                       joins the assistant turn before it);
//                      {"type": "function_call_output", "call_id", "output":
//                       string | [input_text parts]} (its call_id must be a
//                       call of this input or of the continued response);
//                    another item or part type (input_image, input_file,
//                    reasoning, item_reference, ...) is a 400 naming it
//   instructions     string: a system message first (not carried over by
//                    previous_response_id, as OpenAI's API does)
//   tools            {"type": "function", "name", "description"?,
//                    "parameters"?, "strict"?}; {"type": "namespace", "name",
//                    "tools": [function tools]} (its functions offered under
//                    their own names); hosted tools the server cannot run
//                    (web_search*, file_search, code_interpreter,
//                    computer_use*, image_generation, mcp, local_shell,
//                    custom, tool_search) are not offered to the model and
//                    are named in dropped_tools (the response's
//                    metadata "nexus_dropped_tools" and the log), or refused
//                    with 400 unsupported_tool under --strict-tools
//   tool_choice      "auto" | "none" | "required" | {"type": "function", "name"}
//   parallel_tool_calls  bool
//   text.format      {"type": "text" | "json_object" | "json_schema", "name",
//                    "schema", "strict"}
//   max_output_tokens  integer; absent: the rest of the context (not
//                    chat's default of 256: Codex sends none, and takes an
//                    incomplete response as a failed turn)
//   temperature, top_p, seed, and Nexus's sampling extras (openai_request.h)
//   stream           bool
//   store            bool (default true): kept in the response store
//   previous_response_id  the conversation continues that response
//   reasoning, include, metadata, prompt_cache_key, client_metadata,
//   truncation ("disabled"), service_tier, user, safety_identifier,
//   background (false only): accepted; they change nothing Nexus computes
//   (reasoning: Nexus's models have no reasoning items; prompt_cache_key:
//   Nexus caches every prefix anyway; metadata is echoed)
//   generate         WebSocket mode only (false: prefill, no output)
// Other fields are refused by name (400 unknown_parameter).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace nexus::server {

class ResponseStore;

struct ResponsesRequest {
  ConversationRequest conversation;                 // endpoint Responses
  std::string instructions;
  std::optional<std::string> previous_response_id;
  std::optional<int64_t> max_output_tokens;  // as given (echoed); conversation.max_tokens is the bound applied
  bool store = true;
  bool generate = true;
  nlohmann::json metadata = nlohmann::json::object();
  nlohmann::json tool_choice = "auto";     // as given, echoed
  nlohmann::json text_format = {{"type", "text"}};
  std::vector<std::string> dropped_tools;  // hosted tools not offered ("web_search", ...)
  nlohmann::ordered_json tools_echo = nlohmann::ordered_json::array();  // the tools offered, echoed
  // This request's input as items (a string input becomes one message
  // item): GET /v1/responses/{id}/input_items.
  nlohmann::ordered_json input_items = nlohmann::ordered_json::array();
  // The conversation before the new input (the continued response's
  // transcript), then the new input's messages: what the store keeps.
  std::vector<ChatMessage> transcript;
};

struct ResponsesParseOptions {
  int32_t max_priority = kDefaultMaxRequestPriority;
  bool strict_tools = false;   // --strict-tools: a hosted tool is a 400
  bool websocket = false;      // `generate` is accepted
  int32_t n_ctx = 0;           // the model's context: max_output_tokens' default (0: chat's default)
};

// Throws ApiError: 400 as listed above; 400 previous_response_not_found
// (param previous_response_id) when neither `connection` (a WebSocket
// connection's own last response; may be null) nor `store` holds it.
ResponsesRequest parse_responses_request(std::string_view body, const ResponseStore& store,
                                         const ResponsesParseOptions& opts, const ResponseStore* connection = nullptr);

}  // namespace nexus::server
