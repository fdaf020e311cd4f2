// What a tool request (openai_tools.h) changes around a generation:
//  - the prompt: a template that renders `tools` is given them as they are
//    (chat_template.h). A template that does not mention `tools` at all (the
//    plain fallback, a template of a model without tool training) gets the
//    Generic syntax (syntax.h) explained in a system message (first in the
//    conversation, or appended to the client's own first one):
//      "You can call these tools. Their parameters are JSON schemas:\n"
//      <one line per tool: {"name", "description", "parameters"}>
//      "\nTo call tools, reply with only this JSON: {\"tool_calls\": "
//      "[{\"name\": <tool name>, \"arguments\": <arguments object>}]}"
//    and, in such a template, earlier assistant calls are written into the
//    assistant's content in that format and `tool` messages become user
//    messages "Tool result (<tool_call_id>): <content>" (the plain fallback
//    keeps its "Tool:" lines);
//  - the grammar (tool_calls/grammar.h) when the choice forces a call;
//  - the response: the parser setup, with the marker's control token.
#pragma once

#include <memory>
#include <vector>

#include "server/backend.h"
#include "server/chat_template.h"
#include "server/openai_tools.h"
#include "server/tool_calls/stream.h"
#include "server/tool_calls/syntax.h"

namespace nexus::server::tool_calls {

ToolSyntax syntax_for(const ChatTemplate& t);

// The conversation to render (unchanged unless the rules above apply).
std::vector<ChatMessage> prompt_messages(const std::vector<ChatMessage>& messages, const ToolRequest& req,
                                         const ChatTemplate& t);

// Null when the request's output is not parsed for calls (!req.active()).
std::shared_ptr<const ToolCallSetup> response_setup(const ToolRequest& req, const Backend& backend);

}  // namespace nexus::server::tool_calls
