// Conversation: a realtime session's context as TOKEN IDS, append-only, so
// the KV cache the engine keeps for the session (GenerationRequest::session)
// is always an exact prefix of the next turn's prompt and only new input is
// prefilled.
//
// Kept tokens = every prompt sent + every token id the engine sampled. New
// input waits (pending) until a response is created; then it is tokenized
// and appended:
//   chat messages, first in the conversation: the chat template over (system + messages)
//       (the system prompt, if any, opens the conversation; ends with the
//       assistant header), tokenized as chat prompts are (tokenize_chat:
//       BOS per the tokenizer default unless the template wrote it);
//   chat messages after a response: only the continuation segment — the end
//       of the assistant turn, the messages, the next assistant header —
//       tokenized WITHOUT BOS. It is what the template puts after an assistant
//       message, so the whole equals a render of the full conversation (up to
//       tokenization at segment edges). A last kept token that ends a
//       generation (EOS/EOT, never evaluated by the engine) is dropped first:
//       the template writes its own end of turn.
//   chat messages after raw text: the template over the messages, without
//       BOS (a BOS the template writes first is dropped);
//   raw text: tokenized as is (special tokens parsed), with BOS only when it
//       opens the conversation (as POST /v1/completions would).
// Consecutive messages form one segment. Not thread-safe (one strand); a
// copy may build a prompt on another thread (the TokenizerPool) while the
// original takes more input.
#pragma once

#include <cstdint>
#include <cstddef>
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

  void append_input(InputItem item);
  bool has_pending() const { return !pending_.empty(); }
  size_t pending_count() const { return pending_.size(); }
  // Bytes of the pending input (texts, message contents, roles, names,
  // tool calls as JSON), plus the system prompt while the conversation has
  // not started: what the next build_prompt tokenizes.
  size_t pending_bytes() const { return pending_bytes_ + (started() ? 0 : system_.size()); }
  // Drops the first `n` pending items (default all), e.g. input that would
  // overflow the context.
  void discard_pending(size_t n = SIZE_MAX);

  // The next prompt: kept tokens + the pending input, tokenized. Changes
  // nothing (the caller commits once the engine accepted the request).
  std::vector<int32_t> build_prompt() const;
  // Makes `prompt` (from build_prompt over the first `n_items` pending
  // items) the kept tokens; drops those items (later ones stay pending).
  void commit(std::vector<int32_t> prompt, size_t n_items = SIZE_MAX);

  // A token the engine sampled for the running response.
  void on_generated(int32_t token) { tokens_.push_back(token); }
  void on_response_end() { after_response_ = true; }

  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  const Backend& backend_;
  std::string system_;
  std::vector<int32_t> tokens_;
  std::vector<InputItem> pending_;
  size_t pending_bytes_ = 0;
  bool after_response_ = false;  // the kept tokens end with a response
};

// What the template writes after an assistant message's content when
// `messages` follow it: the tail of a rendering of {user, assistant,
// messages...} after the assistant's content. Throws ApiError as
// ChatTemplate::render does.
// The bytes an input item adds to pending_bytes().
size_t input_bytes(const InputItem& item);

std::string chat_continuation(const ChatTemplate& t, const std::vector<ChatMessage>& messages);

}  // namespace nexus::server::realtime
