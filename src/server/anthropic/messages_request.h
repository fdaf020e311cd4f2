// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API
// request (Anthropic's API reference, "Messages"; what Claude Code sends:
// docs/notes/claude-code-messages.md) -> the neutral conversation
// (ConversationRequest with Endpoint::Messages).
//
//   model            string (required by Anthropic; checked against the served
//                    model like every protocol: `claude --model ID`)
//   max_tokens       integer, required (not on count_tokens)
//   system           string or [{"type": "text", "text", "cache_control"?}]
//   messages         [{"role": "user" | "assistant", "content": string |
//                    [blocks]}]; blocks: {"type": "text", "text"},
//                    {"type": "tool_use", "id", "name", "input": object}
//                    (assistant), {"type": "tool_result", "tool_use_id",
//                    "content": string | [text blocks], "is_error"?} (user; its
//                    id must be a tool_use of an earlier assistant turn);
//                    "cache_control" and "citations" on any block accepted;
//                    an image or document block is a 400 naming it (no
//                    image input yet), thinking blocks are dropped (Nexus
//                    never produced them), other types a 400. A "system"
//                    role message (Claude Code puts its environment there)
//                    is a system message at its place.
//   tools            [{"name", "description"?, "input_schema", "type"?:
//                    "custom", "cache_control"?, "strict"?}]; server tools
//                    (a "type" such as web_search_20250305, bash_*,
//                    text_editor_*, code_execution_*) and tools with
//                    "defer_loading": true (Anthropic's tool search, which
//                    Nexus does not run) are not offered to the model (under
//                    --strict-tools a server tool is a 400 unsupported_tool)
//   tool_choice      {"type": "auto" | "any" | "tool" (+ "name") | "none",
//                    "disable_parallel_tool_use"?}
//   stop_sequences   [string] (at most 4, as the other protocols)
//   temperature [0,1], top_p, top_k, stream, metadata (user_id),
//   thinking, service_tier, context_management, output_config, safeguards,
//   container, mcp_servers (empty): accepted; they change nothing Nexus
//   computes (Nexus's models produce no thinking blocks; Nexus caches every
//   prefix, cache_control or not).
// Other fields: 400 naming them.
#pragma once

#include <string_view>

#include "server/openai_request.h"

namespace nexus::server {

struct MessagesParseOptions {
  int32_t max_priority = kDefaultMaxRequestPriority;
  bool count_tokens = false;  // /v1/messages/count_tokens: no max_tokens, stream, ...
  bool strict_tools = false;  // --strict-tools: a server tool is a 400
};

// Throws ApiError 400 as listed above.
ConversationRequest parse_messages_request(std::string_view body, const MessagesParseOptions& opts);

}  // namespace nexus::server
