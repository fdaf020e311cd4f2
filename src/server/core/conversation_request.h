// ConversationRequest: what every protocol front-end parses a request into,
// and the one input of the neutral core (server/prompt_builder.h renders it
// with the chat template, tokenizes it and builds the engine's
// GenerationRequest; the output side is server/core/output.h: text, tool-call
// and end events).
// The front-ends fill it from their own shapes: OpenAI completions and chat
// completions (openai_request.h), the Responses API (responses/
// responses_request.h, which keeps the Responses-only fields beside it) and
// Anthropic Messages (anthropic/messages_request.h); realtime sessions keep
// one as their parameters (realtime_protocol.h). Messages are the chat
// template's typed turns (chat_template.h ChatMessage: text, tool calls, tool
// results); tools, tool choice, response format (as a grammar), sampling,
// stop strings and limits are protocol-neutral here, and each field says the
// protocol field it came from where an error must name it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "sampling/sampling_params.h"
#include "server/chat_template.h"
#include "server/openai_tools.h"

namespace nexus::server {

// The protocol a request came by; every one but Completions is a
// conversation (messages rendered with the chat template).
enum class Endpoint { Completions, ChatCompletions, Responses, Messages };

struct ConversationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                   // "" when absent
  // Completions: the prompt as text, or as token ids when prompt_is_tokens.
  std::string prompt;
  std::vector<int64_t> prompt_tokens;  // unchecked ids (range checked later)
  bool prompt_is_tokens = false;
  // Every endpoint but Completions: the conversation's turns.
  std::vector<ChatMessage> messages;
  std::string messages_param = "messages";  // the field they came from, for errors ("input" in Responses)
  // The rendered prompt opens the assistant's turn (chat_template.h); false
  // for a prefill-only request (the Responses WebSocket mode's generate:
  // false), whose prompt is then a prefix of the next turn's.
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;        // for the chat template; null: it gets none (no tools, or tool_choice none)
  ToolRequest tool_use;                // tools, tool_choice, parallel_tool_calls (openai_tools.h)
  std::optional<int64_t> max_tokens;   // as given; may be <= 0 or huge (checked later)
  std::string max_tokens_param = "max_tokens";  // the field it came from, for errors
  SamplingParams sampling;
  std::vector<std::string> stop;
  std::vector<std::pair<int64_t, float>> logit_bias;  // unchecked ids (range checked later)
  std::shared_ptr<const grammar::Grammar> grammar;    // from response_format or grammar; null = none
  std::string grammar_param = "grammar";              // the field it came from: "response_format" or "grammar"
  bool ignore_eos = false;
  int32_t priority = 0;                // kPriorityDefault
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  std::optional<std::string> prediction;  // Predicted Outputs' text (server/openai_prediction.h)
  int32_t n = 1;                       // choices (choices.h)
  bool echo = false;                   // completions only
};

}  // namespace nexus::server
