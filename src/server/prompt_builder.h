// prompt_builder: a parsed ConversationRequest + the model -> the GenerationRequest
// the engine runs. Holds the checks that need the model:
//   model          must equal Backend::model_id() when given    400 model_not_found
//   prompt ids     each in [0, n_vocab)                          400 invalid_value
//   prompt length  1 <= tokens < n_ctx (room for one new token)  400 context_length_exceeded
//   max_tokens     1 <= max_tokens <= n_ctx (0 too with echo)     400 invalid_value
// max_tokens defaults to kDefaultMaxTokens (256). The effective limit is
// min(max_tokens, n_ctx - prompt tokens): a completion that reaches the end
// of the context stops with finish_reason "length".
//
// Prompts: completions tokenize the prompt text with BOS per the tokenizer
// default and special tokens parsed (as llama.cpp's server does, so a client
// may write a template by hand); token-id prompts are used as given. Chat
// renders the messages (and tools) with the model's chat template
// (chat_template.h), whose errors are ApiErrors (400 when the template
// refuses the conversation, 500 when it fails), then tokenizes them with
// tokenize_chat. Tools: tool_calls/request.h (the conversation a template
// without tool support gets) and tool_calls/grammar.h (tool_choice required
// or named: the grammar that forces the call).
#pragma once

#include <cstdint>
#include <optional>

#include "engine/engine.h"
#include "server/backend.h"
#include "server/openai_request.h"

namespace nexus::server {

inline constexpr int32_t kDefaultMaxTokens = 256;

// A rendered chat prompt -> token ids: special tokens parsed (unless the
// template is the plain fallback), BOS added per the tokenizer's default
// unless the text already starts with the BOS token (the template wrote it):
// never two BOS.
std::vector<int32_t> tokenize_chat(const Backend& backend, const std::string& text);

// The prompt's token ids alone (rendered and tokenized, or checked ids),
// without build_generation's other checks: POST /v1/messages/count_tokens
// counts prompts longer than the context too. Throws ApiError.
std::vector<int32_t> prompt_tokens(const ConversationRequest& req, const Backend& backend);

// Throws ApiError (400) as listed above. echo with logprobs sets
// prompt_logprobs.
GenerationRequest build_generation(const ConversationRequest& req, const Backend& backend);

// echo: the text the completion follows -- the prompt string, or a token
// prompt decoded (Backend::detokenize).
std::string echo_text(const ConversationRequest& req, const Backend& backend);

// The max_tokens check of build_generation, alone (absent is valid): throws
// ApiError 400 invalid_value (param = `param`, the field the client sent)
// unless 1 <= max_tokens <= n_ctx. The realtime session checks its settings
// with it when they are set.
void check_max_tokens(std::optional<int64_t> max_tokens, int32_t n_ctx, const std::string& param = "max_tokens");

}  // namespace nexus::server
