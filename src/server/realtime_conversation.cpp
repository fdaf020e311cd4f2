#include "server/realtime_conversation.h"

#include <algorithm>

#include "server/prompt_builder.h"

namespace nexus::server::realtime {

namespace {

// Marks where the assistant's content ends in a rendering; no template or
// message contains it (control characters around a fixed word).
constexpr std::string_view kMark = "\x1f\x1enexus-assistant-content\x1e\x1f";

void append(std::vector<int32_t>& to, const std::vector<int32_t>& from) { to.insert(to.end(), from.begin(), from.end()); }

// A segment rendered on its own, without the BOS the template may write first.
std::string without_bos(const ChatTemplate& t, std::string text) {
  return t.starts_with_bos(text) ? text.substr(t.bos_token().size()) : text;
}

}  // namespace

std::string chat_continuation(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  // A user turn first: templates that insist on alternating roles starting
  // with the user (Gemma, Mistral) accept the rendering.
  std::vector<ChatMessage> all;
  all.reserve(messages.size() + 2);
  ChatMessage user, assistant;
  user.role = "user";
  user.content = "hi";
  assistant.role = "assistant";
  assistant.content = std::string(kMark);
  all.push_back(std::move(user));
  all.push_back(std::move(assistant));
  all.insert(all.end(), messages.begin(), messages.end());
  const std::string full = t.render(all);
  const size_t at = full.find(kMark);
  return at == std::string::npos ? without_bos(t, t.render(messages)) : full.substr(at + kMark.size());
}


std::vector<int32_t> Conversation::build_prompt() const {
  std::vector<int32_t> ids = tokens_;
  bool after_response = after_response_;
  const ChatTemplate& chat = backend_.chat_template();
  const bool special = chat.parse_special();
  for (size_t i = 0; i < pending_.size();) {
    if (!pending_[i].is_message) {
      const std::string& text = pending_[i].text;
      append(ids, ids.empty() ? backend_.tokenize(text, true) : backend_.tokenize_continuation(text, true));
      after_response = false;
      ++i;
      continue;
    }
    std::vector<ChatMessage> msgs;
    for (; i < pending_.size() && pending_[i].is_message; ++i) msgs.push_back(pending_[i].message);
    if (ids.empty()) {
      if (!system_.empty()) msgs.insert(msgs.begin(), ChatMessage{"system", system_, nullptr, "", ""});
      append(ids, tokenize_chat(backend_, chat.render(msgs)));
    } else if (after_response) {
      if (backend_.is_end_of_generation(ids.back())) ids.pop_back();
      append(ids, backend_.tokenize_continuation(chat_continuation(chat, msgs), special));
    } else {
      append(ids, backend_.tokenize_continuation(without_bos(chat, chat.render(msgs)), special));
    }
    after_response = false;
  }
  return ids;
}

size_t input_bytes(const InputItem& item) {
  if (!item.is_message) return item.text.size();
  const ChatMessage& m = item.message;
  return m.role.size() + m.content.size() + m.name.size() + m.tool_call_id.size() +
         (m.tool_calls.is_null() ? 0 : m.tool_calls.dump().size());
}

void Conversation::append_input(InputItem item) {
  pending_bytes_ += input_bytes(item);
  pending_.push_back(std::move(item));
}

void Conversation::discard_pending(size_t n) {
  n = std::min(n, pending_.size());
  for (size_t i = 0; i < n; ++i) pending_bytes_ -= input_bytes(pending_[i]);
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
}

void Conversation::commit(std::vector<int32_t> prompt, size_t n_items) {
  tokens_ = std::move(prompt);
  discard_pending(n_items);
  after_response_ = false;
}

}  // namespace nexus::server::realtime
