// Chat prompts through the model's Jinja template (src/server/chat_template.h):
// the plain fallback, BOS never doubled, tool calls passed to the template,
// template errors as OpenAI error JSON over HTTP (400 when the template
// refuses the conversation, 500 when it fails).
#include <gtest/gtest.h>

#include <vector>

#include "gguf/gguf_file.h"
#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/prompt_builder.h"
#include "template/template_error.h"
#include "support/server_fixture.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;
using namespace nexus::server;
using nexus::test::FakeBackend;

namespace {

ChatMessage msg(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

const std::vector<ChatMessage> kConversation = {msg("system", "Be brief."), msg("user", "Hi"),
                                                msg("assistant", "Hello!"), msg("user", "Bye")};

constexpr const char* kChatML =
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

int status_of(const ChatTemplate& t, const std::vector<ChatMessage>& ms, std::string* code = nullptr) {
  try {
    (void)t.render(ms);
  } catch (const ApiError& e) {
    if (code) *code = e.code;
    return e.status;
  }
  return 200;
}

// A Backend over a real Tokenizer (no engine): what tokenize_chat sees.
class TokenizerBackend final : public Backend {
 public:
  TokenizerBackend(const Tokenizer& tok, ChatTemplate t) : tok_(tok), t_(std::move(t)) {}
  const std::string& model_id() const override { return id_; }
  int32_t n_ctx() const override { return 4096; }
  int32_t n_vocab() const override { return tok_.n_vocab(); }
  const ChatTemplate& chat_template() const override { return t_; }
  std::vector<int32_t> tokenize(std::string_view text, bool special) const override {
    return tok_.encode(text, tok_.add_bos_default(), special);
  }
  std::vector<int32_t> tokenize_continuation(std::string_view text, bool special) const override {
    return tok_.encode(text, false, special);
  }
  std::shared_ptr<RequestHandle> submit(GenerationRequest, EventCallback) override { return nullptr; }

 private:
  const Tokenizer& tok_;
  ChatTemplate t_;
  std::string id_ = "tok";
};

}  // namespace

TEST(ChatTemplate, PlainFallbackIsTheDocumentedFormat) {
  const ChatTemplate plain;
  EXPECT_TRUE(plain.is_plain());
  EXPECT_FALSE(plain.parse_special());
  EXPECT_EQ(plain.render(kConversation), "System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: Bye\nAssistant:");
  EXPECT_EQ(plain.render(std::vector<ChatMessage>{msg("user", "Once upon a time")}), "User: Once upon a time\nAssistant:");
  EXPECT_EQ(plain.render(std::vector<ChatMessage>{msg("tool", "42")}), "Tool: 42\nAssistant:");
}

TEST(ChatTemplate, RunsTheModelsTemplate) {
  const ChatTemplate t(kChatML, "gguf", "", "<|im_end|>");
  EXPECT_FALSE(t.is_plain());
  EXPECT_TRUE(t.parse_special());
  EXPECT_EQ(t.origin(), "gguf");
  EXPECT_EQ(t.render(kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(t.render(kConversation, nullptr, false).find("<|im_start|>assistant\n", 100), std::string::npos);
}

TEST(ChatTemplate, ASyntaxErrorIsRefusedAtLoad) {
  EXPECT_THROW(ChatTemplate("{% for m in messages %}", "gguf", "", ""), tmpl::TemplateError);
  EXPECT_THROW(ChatTemplate("{{ 'unterminated }}", "gguf", "", ""), tmpl::TemplateError);
}

TEST(ChatTemplate, ToolCallsAndToolResultsReachTheTemplate) {
  const ChatTemplate t(
      "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{% for c in m.tool_calls %}"
      "{{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}{% endif %}"
      "{% if m.tool_call_id is defined %}[{{ m.tool_call_id }}]{% endif %}{{ m.content }};{% endfor %}"
      "{% if tools %}tools={{ tools | map(attribute='function') | map(attribute='name') | join(',') }}{% endif %}",
      "gguf", "", "");
  ChatMessage call = msg("assistant", "");
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\": 2, \"b\": 3}"}},
          {"id":"c2","type":"function","function":{"name":"echo","arguments":"not json"}}])");
  ChatMessage result = msg("tool", "5");
  result.tool_call_id = "c1";
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"add"}},{"type":"function","function":{"name":"echo"}}])");
  // Arguments that hold a JSON object reach the template as that object;
  // others stay the string the client sent.
  EXPECT_EQ(t.render(std::vector<ChatMessage>{msg("user", "2+3?"), call, result}, tools),
            "user:2+3?;assistant:add{\"a\": 2, \"b\": 3}echo\"not json\";tool:[c1]5;tools=add,echo");
}

TEST(ChatTemplate, RaiseExceptionIs400AndOtherFailuresAre500) {
  const ChatTemplate strict(
      "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with the user') }}{% endif %}ok",
      "gguf", "", "");
  std::string code;
  EXPECT_EQ(status_of(strict, {msg("assistant", "x")}, &code), 400);
  EXPECT_EQ(code, "chat_template_rejected");
  try {
    (void)strict.render(std::vector<ChatMessage>{msg("assistant", "x")});
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "messages");
    EXPECT_NE(e.message.find("Conversation must start with the user"), std::string::npos) << e.message;
  }
  EXPECT_EQ(status_of(strict, {msg("user", "x")}), 200);

  const ChatTemplate broken("{{ messages | no_such_filter }}", "gguf", "", "");
  EXPECT_EQ(status_of(broken, {msg("user", "x")}, &code), 500);
  EXPECT_EQ(code, "chat_template_error");
  const ChatTemplate endless("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
                             "gguf", "", "");
  EXPECT_EQ(status_of(endless, {msg("user", "x")}, &code), 500);
  EXPECT_EQ(code, "chat_template_error");
}

TEST(ChatTemplate, BosIsNeverDoubled) {
  // FakeBackend: tokenize() prepends BOS id 1, tokenize_continuation() does not.
  FakeBackend fake;
  fake.chat = ChatTemplate("{{ bos_token }}{{ messages[0].content }}", "gguf", "<s>", "</s>");
  const std::vector<int32_t> with = tokenize_chat(fake, fake.chat.render(std::vector<ChatMessage>{msg("user", "hi")}));
  ASSERT_FALSE(with.empty());
  EXPECT_NE(with[0], 1) << "the template wrote BOS: the tokenizer must not add another";
  fake.chat = ChatTemplate("{{ messages[0].content }}", "gguf", "<s>", "</s>");
  const std::vector<int32_t> without = tokenize_chat(fake, fake.chat.render(std::vector<ChatMessage>{msg("user", "hi")}));
  ASSERT_FALSE(without.empty());
  EXPECT_EQ(without[0], 1) << "the template wrote no BOS: the tokenizer adds it";
}

TEST(ChatTemplate, BosIsNeverDoubledWithARealVocabulary) {
  // Phi-3's GGUF: add_bos_token is true and its template writes {{ bos_token }}.
  NEXUS_REQUIRE_SHARED(path, "tokenizers/ggml-vocab-phi-3.gguf");
  GgufFile gguf(path);
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(gguf);
  ASSERT_TRUE(tok->add_bos_default());
  const std::optional<std::string> source = gguf.get_string("tokenizer.chat_template");
  ASSERT_TRUE(source.has_value());
  TokenizerBackend b(*tok, ChatTemplate(*source, "gguf", tok->token_text(tok->bos_id()), tok->token_text(tok->eos_id())));
  const std::string text = b.chat_template().render(std::vector<ChatMessage>{msg("user", "Hello")});
  ASSERT_TRUE(b.chat_template().starts_with_bos(text)) << text;
  const std::vector<int32_t> ids = tokenize_chat(b, text);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], tok->bos_id());
  EXPECT_NE(ids[1], tok->bos_id()) << "two BOS tokens";
  // The rendered special tokens are single tokens (parsed as special).
  const std::vector<int32_t> user = tok->encode("<|user|>", false, true);
  EXPECT_EQ(user.size(), 1u);
  EXPECT_EQ(ids[1], user[0]);
}

class ChatTemplateHttp : public nexus::test::ServerFixture {
 protected:
  ChatTemplateHttp() { manual_start_ = true; }
};

TEST_F(ChatTemplateHttp, TemplateErrorsAreOpenAiErrors) {
  backend->chat = ChatTemplate(
      "{% if messages | length > 1 %}{{ raise_exception('Only one message, please') }}{% endif %}"
      "{% if messages[0].content == 'boom' %}{{ messages[0].content.no_such_method() }}{% endif %}"
      "{{ messages[0].content }}",
      "gguf", "", "");
  start_server();
  auto c = connect();
  auto e = expect_error(c->post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"a"},
                                                                        {"role":"user","content":"b"}]})"),
                        400);
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], "messages");
  EXPECT_EQ(e["code"], "chat_template_rejected");
  EXPECT_NE(e["message"].get<std::string>().find("Only one message, please"), std::string::npos);

  e = expect_error(c->post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"boom"}]})"), 500);
  EXPECT_EQ(e["type"], "server_error");
  EXPECT_EQ(e["code"], "chat_template_error");
  EXPECT_NE(e["message"].get<std::string>().find("no_such_method"), std::string::npos) << e["message"];

  // The same connection then serves a request the template accepts.
  const auto ok = c->post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"fine"}],"max_tokens":2})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(ChatTemplateHttp, BadToolCallsAreRefusedByName) {
  start_server();
  auto c = connect();
  auto e = expect_error(
      c->post("/v1/chat/completions",
              R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"arguments":"{}"}}]}]})"),
      400);
  EXPECT_EQ(e["param"], "messages[0].tool_calls[0].function.name");
  e = expect_error(c->post("/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})"),
                   400);
  EXPECT_EQ(e["param"], "messages[0].tool_calls");
  e = expect_error(c->post("/v1/chat/completions",
                           R"({"messages":[{"role":"tool","content":"x","tool_call_id":7}]})"),
                   400);
  EXPECT_EQ(e["param"], "messages[0].tool_call_id");
}
