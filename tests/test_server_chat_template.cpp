// Chat template detection and rendering (src/server/chat_template.h).
#include <gtest/gtest.h>

#include <vector>

#include "server/chat_template.h"

using namespace nexus::server;

namespace {
const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
}

TEST(ChatTemplate, DetectsFamiliesByMarkers) {
  // Abridged real templates (the marker tokens are what matters).
  EXPECT_EQ(detect_chat_family(""), ChatFamily::Plain);
  EXPECT_EQ(detect_chat_family("{% for m in messages %}{{ m.content }}{% endfor %}"), ChatFamily::Plain);
  EXPECT_EQ(detect_chat_family("{{'<|im_start|>' + message['role'] + '\\n'}}"), ChatFamily::ChatML);
  EXPECT_EQ(detect_chat_family("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}"),
            ChatFamily::Llama3);
  EXPECT_EQ(detect_chat_family("{{ '<start_of_turn>' + role + '\\n' }}"), ChatFamily::Gemma);
  EXPECT_EQ(detect_chat_family("{{'<|user|>' + '\\n' + message['content'] + '<|end|>'}}"), ChatFamily::Phi3);
  EXPECT_EQ(detect_chat_family("{{ '<|user|>\\n' + message['content'] + eos_token }}"), ChatFamily::Zephyr);
  EXPECT_EQ(detect_chat_family("{{ '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>' }}"), ChatFamily::Llama2);
  EXPECT_EQ(detect_chat_family("{{ '[INST] ' + message['content'] + ' [/INST]' }}"), ChatFamily::Mistral);
}

TEST(ChatTemplate, NamesRoundTrip) {
  for (ChatFamily f : {ChatFamily::Plain, ChatFamily::ChatML, ChatFamily::Llama3, ChatFamily::Gemma,
                       ChatFamily::Phi3, ChatFamily::Zephyr, ChatFamily::Llama2, ChatFamily::Mistral}) {
    EXPECT_EQ(chat_family_from_name(chat_family_name(f)), f);
  }
  EXPECT_FALSE(chat_family_from_name("jinja").has_value());
  EXPECT_FALSE(uses_special_tokens(ChatFamily::Plain));
  EXPECT_TRUE(uses_special_tokens(ChatFamily::ChatML));
}

TEST(ChatTemplate, RendersChatML) {
  EXPECT_EQ(render_chat(ChatFamily::ChatML, kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, RendersLlama3) {
  EXPECT_EQ(render_chat(ChatFamily::Llama3, kConversation),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RendersGemmaWithSystemFoldedIntoFirstUserTurn) {
  EXPECT_EQ(render_chat(ChatFamily::Gemma, kConversation),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, RendersPhi3AndZephyr) {
  EXPECT_EQ(render_chat(ChatFamily::Phi3, kConversation),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
            "<|user|>\nBye<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render_chat(ChatFamily::Zephyr, kConversation),
            "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n"
            "<|user|>\nBye</s>\n<|assistant|>\n");
}

TEST(ChatTemplate, RendersLlama2AndMistral) {
  // The first <s> (BOS) comes from the tokenizer, later ones are rendered.
  EXPECT_EQ(render_chat(ChatFamily::Llama2, kConversation),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello!</s><s>[INST] Bye [/INST]");
  EXPECT_EQ(render_chat(ChatFamily::Mistral, kConversation),
            "[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Bye [/INST]");
}

TEST(ChatTemplate, PlainFallback) {
  EXPECT_EQ(render_chat(ChatFamily::Plain, kConversation),
            "System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: Bye\nAssistant:");
  const std::vector<ChatMessage> one = {{"user", "Once upon a time"}};
  EXPECT_EQ(render_chat(ChatFamily::Plain, one), "User: Once upon a time\nAssistant:");
}

TEST(ChatTemplate, SystemOnlyConversationStillRenders) {
  const std::vector<ChatMessage> sys = {{"system", "S"}};
  EXPECT_EQ(render_chat(ChatFamily::Gemma, sys), "<start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render_chat(ChatFamily::Llama2, sys), "[INST] <<SYS>>\nS\n<</SYS>>\n\n [/INST]");
}
