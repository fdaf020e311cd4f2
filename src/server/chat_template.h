// Chat templates: a conversation (messages) -> the prompt text a chat model
// was trained on.
//
// GGUF files store the template as Jinja source (tokenizer.chat_template).
// Instead of running Jinja we recognise the template's family by its marker
// tokens and render that family natively (the approach of llama.cpp's
// llm_chat_detect_template):
//   chatml   "<|im_start|>"            <|im_start|>user\n...<|im_end|>\n
//   llama3   "<|start_header_id|>"     <|start_header_id|>user<|end_header_id|>\n\n...<|eot_id|>
//   gemma    "<start_of_turn>"         <start_of_turn>user\n...<end_of_turn>\n (no system
//                                      role: the system text opens the first user turn)
//   phi3     "<|user|>" + "<|end|>"    <|user|>\n...<|end|>\n
//   zephyr   "<|user|>" (no <|end|>)   <|user|>\n...</s>\n
//   llama2   "[INST]" + "<<SYS>>"      [INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] reply </s><s>[INST] ...
//   mistral  "[INST]" (no <<SYS>>)     [INST] sys\n\nuser [/INST] reply</s>[INST] ...
//   plain    no template, or one we do not recognise (documented fallback):
//            "System: ...\nUser: ...\nAssistant: ...\n" then "Assistant:"
// BOS is never rendered: the tokenizer adds it per its default. Rendered text
// uses the family's special tokens literally, so it is tokenized with
// parse_special = uses_special_tokens(family).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace nexus::server {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;
};

enum class ChatFamily { Plain, ChatML, Llama3, Gemma, Phi3, Zephyr, Llama2, Mistral };

// The family of a Jinja template source; Plain for "" or an unknown template.
ChatFamily detect_chat_family(std::string_view template_source);

// "plain", "chatml", "llama3", "gemma", "phi3", "zephyr", "llama2", "mistral".
const char* chat_family_name(ChatFamily f);
std::optional<ChatFamily> chat_family_from_name(std::string_view name);

// Whether rendered text contains special tokens to be parsed as such.
bool uses_special_tokens(ChatFamily f);

// Renders the conversation followed by the opening of the assistant's turn.
std::string render_chat(ChatFamily f, std::span<const ChatMessage> messages);

}  // namespace nexus::server
