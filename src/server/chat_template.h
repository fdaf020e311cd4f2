// Chat templates: a conversation (messages, tools) -> the prompt text a chat
// model was trained on, by executing the model's own Jinja template
// (tokenizer.chat_template in the GGUF, or a file given to `nexus serve
// --chat-template-file`) with Nexus's sandboxed interpreter (src/template/jinja.h).
//
// The template sees what transformers' apply_chat_template passes:
//   messages               [{role, content, tool_calls?, tool_call_id?, name?}];
//                          content is a string (text parts were joined with
//                          "\n"); tool_calls as the client sent them, except
//                          that function.arguments holding a JSON object as a
//                          string is passed as that object (templates write
//                          it with `| tojson`, as llama.cpp's server does)
//   add_generation_prompt  true (the prompt ends opening the assistant's turn)
//   bos_token, eos_token   the vocabulary's BOS/EOS token text ("" when none)
//   tools                  the request's tools, only when it has some
//   strftime_now(fmt)      today's date, for templates that print it
// Special tokens in the rendered text are parsed as such.
//
// BOS: templates that write bos_token themselves (Llama 3, Gemma, Phi-3...)
// and tokenizers that add BOS by default (tokenizer.ggml.add_bos_token)
// would give two BOS tokens; starts_with_bos() tells the caller to tokenize
// without adding one (prompt_builder.cpp). Default system prompts are the
// template's own (e.g. Qwen 2.5's "You are Qwen, created by Alibaba Cloud...").
//
// Without a template (or with --chat-template plain) the documented fallback
// is rendered, without special tokens:
//   "System: ...\nUser: ...\nAssistant: ...\nTool: ...\n" then "Assistant:"
//
// Errors (ApiError, OpenAI's error JSON):
//   400 invalid_request_error, param "messages", code "chat_template_rejected":
//       the template refused the conversation with raise_exception (e.g.
//       "Conversation roles must alternate user/assistant/..."): the client
//       can fix the request; or the rendered prompt exceeds the output limit
//       (code "chat_template_too_large").
//   500 server_error, code "chat_template_error": the template failed for
//       any other reason (a type error, an unknown filter, a sandbox limit on
//       loops/steps/depth): a defect of the model's template, not of the
//       request, so the client cannot fix it by changing its input.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nexus::tmpl {
class Template;
}

namespace nexus::server {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;  // text (content parts joined)
  nlohmann::ordered_json tool_calls;  // assistant: the calls it made (null when none)
  std::string tool_call_id;           // tool: the call this answers ("" when absent)
  std::string name;                   // tool (or any role): the name field ("" when absent)
};

class ChatTemplate {
 public:
  // The plain fallback (no special tokens).
  ChatTemplate();
  // A Jinja template; throws tmpl::TemplateError(Syntax) when it does not parse.
  // `origin` names it in logs and session.created ("gguf", "file").
  ChatTemplate(std::string_view source, std::string origin, std::string bos_token, std::string eos_token);
  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&);
  ChatTemplate& operator=(const ChatTemplate&);

  bool is_plain() const { return origin_ == "plain"; }
  const std::string& origin() const { return origin_; }  // "plain", "gguf", "file"
  const std::string& bos_token() const { return bos_; }
  const std::string& source() const { return source_; }  // the Jinja text ("" for the plain fallback)
  bool parse_special() const { return !is_plain(); }

  // The prompt for `messages` (and `tools` when not null), ending with the
  // opening of the assistant's turn. Throws ApiError as listed above.
  std::string render(std::span<const ChatMessage> messages, const nlohmann::ordered_json& tools = nullptr,
                     bool add_generation_prompt = true) const;
  // Whether `text` begins with the BOS token's text (the template wrote it).
  bool starts_with_bos(std::string_view text) const;

 private:
  std::shared_ptr<const tmpl::Template> tmpl_;
  std::string origin_ = "plain";
  std::string bos_, eos_;
  std::string source_;
};

}  // namespace nexus::server
