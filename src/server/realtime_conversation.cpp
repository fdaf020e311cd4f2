#include "server/realtime_conversation.h"

namespace nexus::server::realtime {

namespace {

// Marks where the assistant's content ends in a rendering; no template or
// message contains it (control characters around a fixed word).
constexpr std::string_view kMark = "\x1f\x1enexus-assistant-content\x1e\x1f";

void append(std::vector<int32_t>& to, const std::vector<int32_t>& from) { to.insert(to.end(), from.begin(), from.end()); }

}  // namespace

std::string chat_continuation(ChatFamily f, const std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> all;
  all.reserve(messages.size() + 1);
  all.push_back(ChatMessage{"assistant", std::string(kMark)});
  all.insert(all.end(), messages.begin(), messages.end());
  const std::string full = render_chat(f, all);
  const size_t at = full.find(kMark);
  return at == std::string::npos ? render_chat(f, messages) : full.substr(at + kMark.size());
}

std::vector<int32_t> Conversation::build_prompt() const {
  std::vector<int32_t> ids = tokens_;
  bool after_response = after_response_;
  const ChatFamily family = backend_.chat_family();
  const bool special = uses_special_tokens(family);
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
      if (!system_.empty()) msgs.insert(msgs.begin(), ChatMessage{"system", system_});
      append(ids, backend_.tokenize(render_chat(family, msgs), special));
    } else if (after_response) {
      if (backend_.is_end_of_generation(ids.back())) ids.pop_back();
      append(ids, backend_.tokenize_continuation(chat_continuation(family, msgs), special));
    } else {
      append(ids, backend_.tokenize_continuation(render_chat(family, msgs), special));
    }
    after_response = false;
  }
  return ids;
}

void Conversation::commit(std::vector<int32_t> prompt) {
  tokens_ = std::move(prompt);
  pending_.clear();
  after_response_ = false;
}

}  // namespace nexus::server::realtime
