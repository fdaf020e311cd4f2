// Conversation: a realtime session's context as TOKEN IDS, append-only, so
// the KV cache the engine keeps for the session (GenerationRequest::session)
// is always an exact prefix of the next turn's prompt and only new input is
// prefilled.
//
// Kept tokens = every prompt sent + every token id the engine sampled. New
// input waits (pending) until a response is created; then it is tokenized
// and appended:
//   chat messages, first in the conversation: render_chat(system + messages)
//       (the system prompt, if any, opens the conversation; ends with the
//       assistant header), tokenized WITH BOS per the tokenizer default;
//   chat messages after a response: only the continuation segment — the end
//       of the assistant turn, the messages, the next assistant header —
//       tokenized WITHOUT BOS. It is what render_chat puts after an assistant
//       message, so the whole equals a render of the full conversation (up to
//       tokenization at segment edges). A last kept token that ends a
//       generation (EOS/EOT, never evaluated by the engine) is dropped first:
//       the template writes its own end of turn.
//   chat messages after raw text: render_chat(messages), without BOS;
//   raw text: tokenized as is (special tokens parsed), with BOS only when it
//       opens the conversation (as POST /v1/completions would).
// Consecutive messages form one segment. Not thread-safe (one strand).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/realtime_protocol.h"

namespace nexus::server::realtime {

class Conversation {
 public:
  explicit Conversation(const Backend& backend) : backend_(backend) {}

  void set_system(std::string system) { system_ = std::move(system); }
  const std::string& system() const { return system_; }
  bool started() const { return !tokens_.empty(); }

  void append_input(InputItem item) { pending_.push_back(std::move(item)); }
  bool has_pending() const { return !pending_.empty(); }
  // Drops the input not yet sent (e.g. input that would overflow the context).
  void discard_pending() { pending_.clear(); }

  // The next prompt: kept tokens + the pending input, tokenized. Changes
  // nothing (the caller commits once the engine accepted the request).
  std::vector<int32_t> build_prompt() const;
  // Makes `prompt` (from build_prompt) the kept tokens; clears the pending input.
  void commit(std::vector<int32_t> prompt);

  // A token the engine sampled for the running response.
  void on_generated(int32_t token) { tokens_.push_back(token); }
  void on_response_end() { after_response_ = true; }

  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  const Backend& backend_;
  std::string system_;
  std::vector<int32_t> tokens_;
  std::vector<InputItem> pending_;
  bool after_response_ = false;  // the kept tokens end with a response
};

// What render_chat(f, {assistant: ..., messages...}) writes after the
// assistant message's content.
std::string chat_continuation(ChatFamily f, const std::vector<ChatMessage>& messages);

}  // namespace nexus::server::realtime
