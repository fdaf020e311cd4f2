#include "server/chat_template.h"

#include <array>
#include <utility>
#include <vector>

namespace nexus::server {

namespace {

bool has(std::string_view s, std::string_view marker) { return s.find(marker) != std::string_view::npos; }

constexpr std::array<std::pair<ChatFamily, const char*>, 8> kNames{{
    {ChatFamily::Plain, "plain"},   {ChatFamily::ChatML, "chatml"}, {ChatFamily::Llama3, "llama3"},
    {ChatFamily::Gemma, "gemma"},   {ChatFamily::Phi3, "phi3"},     {ChatFamily::Zephyr, "zephyr"},
    {ChatFamily::Llama2, "llama2"}, {ChatFamily::Mistral, "mistral"},
}};

// "System"/"User"/"Assistant"/"Tool" for the plain fallback.
std::string title(const std::string& role) {
  if (role.empty()) return role;
  std::string t = role;
  t[0] = static_cast<char>(t[0] - 'a' + 'A');
  return t;
}

// Gemma, Llama 2 and Mistral have no system turn: the system text is
// prepended to the first user message. Returns the merged list.
std::vector<ChatMessage> fold_system(std::span<const ChatMessage> in, const std::string& sep) {
  std::vector<ChatMessage> out;
  std::string system;
  for (const ChatMessage& m : in) {
    if (m.role == "system") {
      system += system.empty() ? m.content : "\n" + m.content;
      continue;
    }
    ChatMessage c = m;
    if (c.role == "tool") c.role = "user";
    if (!system.empty() && c.role == "user") {
      c.content = system + sep + c.content;
      system.clear();
    }
    out.push_back(std::move(c));
  }
  if (!system.empty()) out.insert(out.begin(), ChatMessage{"user", system});
  return out;
}

std::string render_llama2(std::span<const ChatMessage> messages, bool sys_block) {
  // Llama 2 wraps the system prompt in <<SYS>> inside the first [INST];
  // Mistral just puts it before the first user message.
  std::vector<ChatMessage> ms;
  if (sys_block) {
    std::string system;
    for (const ChatMessage& m : messages) {
      if (m.role == "system") system += (system.empty() ? "" : "\n") + m.content;
      else ms.push_back(m);
    }
    if (!system.empty()) {
      const std::string block = "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
      if (!ms.empty() && ms.front().role != "assistant") ms.front().content = block + ms.front().content;
      else ms.insert(ms.begin(), ChatMessage{"user", block});
    }
  } else {
    ms = fold_system(messages, "\n\n");
  }
  std::string out;
  bool first = true;
  for (const ChatMessage& m : ms) {
    if (m.role == "assistant") {
      out += (sys_block ? " " : "") + m.content + "</s>";
    } else {
      if (!first && sys_block) out += "<s>";  // the first BOS comes from the tokenizer
      out += "[INST] " + m.content + " [/INST]";
    }
    first = false;
  }
  return out;
}

}  // namespace

ChatFamily detect_chat_family(std::string_view t) {
  if (t.empty()) return ChatFamily::Plain;
  if (has(t, "<|im_start|>")) return ChatFamily::ChatML;
  if (has(t, "<|start_header_id|>")) return ChatFamily::Llama3;
  if (has(t, "<start_of_turn>")) return ChatFamily::Gemma;
  if (has(t, "<|user|>")) return has(t, "<|end|>") ? ChatFamily::Phi3 : ChatFamily::Zephyr;
  if (has(t, "[INST]")) return has(t, "<<SYS>>") ? ChatFamily::Llama2 : ChatFamily::Mistral;
  return ChatFamily::Plain;
}

const char* chat_family_name(ChatFamily f) {
  for (const auto& [fam, name] : kNames) {
    if (fam == f) return name;
  }
  return "plain";
}

std::optional<ChatFamily> chat_family_from_name(std::string_view name) {
  for (const auto& [fam, n] : kNames) {
    if (name == n) return fam;
  }
  return std::nullopt;
}

bool uses_special_tokens(ChatFamily f) { return f != ChatFamily::Plain; }

std::string render_chat(ChatFamily f, std::span<const ChatMessage> messages) {
  std::string out;
  switch (f) {
    case ChatFamily::ChatML:
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      return out + "<|im_start|>assistant\n";
    case ChatFamily::Llama3:
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + (m.role == "tool" ? std::string("ipython") : m.role) +
               "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      }
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFamily::Gemma:
      for (const ChatMessage& m : fold_system(messages, "\n\n")) {
        out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : "user") + "\n" + m.content +
               "<end_of_turn>\n";
      }
      return out + "<start_of_turn>model\n";
    case ChatFamily::Phi3:
      for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      return out + "<|assistant|>\n";
    case ChatFamily::Zephyr:
      for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
      return out + "<|assistant|>\n";
    case ChatFamily::Llama2:
      return render_llama2(messages, true);
    case ChatFamily::Mistral:
      return render_llama2(messages, false);
    case ChatFamily::Plain:
      break;
  }
  for (const ChatMessage& m : messages) out += title(m.role) + ": " + m.content + "\n";
  return out + "Assistant:";
}

}  // namespace nexus::server
