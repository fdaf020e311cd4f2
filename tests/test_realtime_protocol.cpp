// The realtime protocol's pure parts: client event parsing, parameter
// resolution, server event shapes, and the token-id conversation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/realtime_conversation.h"
#include "server/realtime_protocol.h"
#include "support/fake_backend.h"

using namespace nexus;
using namespace nexus::server;
using namespace nexus::server::realtime;
using nlohmann::json;

namespace {

std::string error_code_of(std::string_view frame) {
  try {
    parse_client_event(frame);
  } catch (const EventError& e) {
    return e.code;
  }
  return "";
}

std::vector<int32_t> bytes(std::string_view s, bool bos) {
  std::vector<int32_t> ids;
  if (bos) ids.push_back(1);
  for (unsigned char c : s) ids.push_back(c + 2);
  return ids;
}

TEST(RealtimeProtocol, ParsesEveryClientEvent) {
  auto e = parse_client_event(R"({"type":"session.update","session":{"temperature":0}})");
  EXPECT_EQ(e.type, EventType::SessionUpdate);
  EXPECT_EQ(e.session["temperature"], 0);
  e = parse_client_event(R"({"type":"input.append","message":{"role":"user","content":"hi"}})");
  ASSERT_TRUE(e.input && e.input->is_message);
  EXPECT_EQ(e.input->message.role, "user");
  EXPECT_EQ(e.input->message.content, "hi");
  e = parse_client_event(R"({"type":"input.append","text":"raw"})");
  ASSERT_TRUE(e.input && !e.input->is_message);
  EXPECT_EQ(e.input->text, "raw");
  e = parse_client_event(R"({"type":"response.create"})");
  EXPECT_EQ(e.type, EventType::ResponseCreate);
  EXPECT_TRUE(e.response.is_object() && e.response.empty());
  e = parse_client_event(R"({"type":"response.create","response":{"max_tokens":3}})");
  EXPECT_EQ(e.response["max_tokens"], 3);
  EXPECT_EQ(parse_client_event(R"({"type":"response.cancel"})").type, EventType::ResponseCancel);
  e = parse_client_event(R"({"type":"response.redirect","text":"x","response":{"max_tokens":2}})");
  EXPECT_EQ(e.type, EventType::ResponseRedirect);
  EXPECT_EQ(e.input->text, "x");
  EXPECT_EQ(e.response["max_tokens"], 2);
  EXPECT_EQ(parse_client_event(R"({"type":"session.close"})").type, EventType::SessionClose);
}

TEST(RealtimeProtocol, RejectsBadEvents) {
  EXPECT_EQ(error_code_of("{not json"), "invalid_json");
  EXPECT_EQ(error_code_of("[1,2]"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"kind":"x"})"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":7})"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":"response.explode"})"), "unknown_event");
  EXPECT_EQ(error_code_of(R"({"type":"session.update"})"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":"input.append"})"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":"input.append","text":""})"), "invalid_value");
  EXPECT_EQ(error_code_of(R"({"type":"input.append","text":"a","message":{"role":"user","content":"b"}})"),
            "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":"input.append","message":{"role":"narrator","content":"b"}})"),
            "invalid_value");
  // An assistant message is input too: a conversation given whole (the
  // gateway's failover replays one so).
  EXPECT_EQ(error_code_of(R"({"type":"input.append","message":{"role":"assistant","content":"b"}})"), "");
  EXPECT_EQ(error_code_of(R"({"type":"input.append","message":{"role":"user","content":""}})"), "invalid_value");
  EXPECT_EQ(error_code_of(R"({"type":"input.append","message":{"role":null,"content":"b"}})"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":"input.append","message":{"role":"user","content":5}})"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":"response.create","response":[1]})"), "invalid_event");
  EXPECT_EQ(error_code_of(R"({"type":"response.redirect"})"), "invalid_event");
}

TEST(RealtimeProtocol, ErrorsCarryTheEventTypeOnceKnown) {
  const auto event_of = [](std::string_view frame) {
    try {
      parse_client_event(frame);
    } catch (const EventError& e) {
      return e.event;
    }
    return std::string("(parsed)");
  };
  EXPECT_EQ(event_of("{not json"), "");
  EXPECT_EQ(event_of(R"({"type":7})"), "");
  EXPECT_EQ(event_of(R"({"type":"response.explode"})"), "response.explode");
  EXPECT_EQ(event_of(R"({"type":"input.append","message":{"role":"bot","content":"b"}})"), "input.append");
  EXPECT_EQ(event_of(R"({"type":"response.redirect"})"), "response.redirect");
  EXPECT_EQ(event_of(R"({"type":"session.update","session":1})"), "session.update");
}

// The unknown type is quoted whole, its control characters as \xNN.
TEST(RealtimeProtocol, ErrorMessagesKeepTheEventTypePastANulByte) {
  try {
    parse_client_event(R"({"type":"response\u0000.explode"})");
    ADD_FAILURE() << "parsed";
  } catch (const EventError& e) {
    EXPECT_EQ(e.message, R"(Unknown event type 'response\x00.explode'.)");
  }
}

TEST(RealtimeProtocol, ResolvesParamsWithOverrides) {
  const json session{{"temperature", 0.5}, {"max_tokens", 7}, {"return_tokens", true}, {"system", "s"}};
  ResolvedParams p = resolve_params(session, json{{"max_tokens", 3}, {"stop", "x"}}, "m", 512, 10);
  EXPECT_FLOAT_EQ(p.request.sampling.temperature, 0.5f);
  EXPECT_EQ(p.request.max_tokens, 3);
  EXPECT_EQ(p.request.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(p.return_tokens);
  auto code = [](const json& s, const json& o) {
    try {
      resolve_params(s, o, "m", 512, 10);
    } catch (const EventError& e) {
      return e.code;
    }
    return std::string();
  };
  EXPECT_EQ(code(json{{"temperature", 9}}, json::object()), "invalid_value");
  EXPECT_EQ(code(json{{"max_tokens", 0}}, json::object()), "invalid_value");
  EXPECT_EQ(code(json::object(), json{{"max_tokens", -3}}), "invalid_value");
  EXPECT_EQ(code(json{{"max_tokens", 513}}, json::object()), "invalid_value");  // over n_ctx
  EXPECT_EQ(code(json{{"max_tokens", 512}}, json::object()), "");
  EXPECT_EQ(code(json{{"temperature", "hot"}}, json::object()), "invalid_type");
  EXPECT_EQ(code(json{{"model", "other"}}, json::object()), "model_not_found");
  EXPECT_EQ(code(json::object(), json{{"colour", 1}}), "unknown_parameter");
  EXPECT_EQ(code(json::object(), json{{"system", "late"}}), "invalid_event");
  EXPECT_EQ(code(json::object(), json{{"return_tokens", 1}}), "invalid_type");
  EXPECT_EQ(code(json{{"model", "m"}}, json{{"priority", "interactive"}}), "");
  // The server's priority cap (here interactive, 10) holds for sessions too.
  EXPECT_EQ(code(json{{"priority", 11}}, json::object()), "priority_above_cap");
  EXPECT_EQ(code(json::object(), json{{"priority", 1000}}), "priority_above_cap");
}

TEST(RealtimeProtocol, ServerEventShapes) {
  auto j = json::parse(session_created("sess_1", "m", 512, "gguf"));
  EXPECT_EQ(j["type"], "session.created");
  EXPECT_EQ(j["session"]["id"], "sess_1");
  EXPECT_EQ(j["session"]["n_ctx"], 512);
  EXPECT_EQ(j["session"]["chat_template"], "gguf");
  const std::vector<int32_t> ids{1, 2, 3};
  j = json::parse(response_created("resp_1", 3, 2, &ids));
  EXPECT_EQ(j["response"]["prompt_token_ids"], json(ids));
  EXPECT_EQ(j["response"]["input_tokens"], 2);
  EXPECT_FALSE(json::parse(response_created("resp_1", 3, 2, nullptr))["response"].contains("prompt_token_ids"));
  j = json::parse(response_delta("resp_1", "hi", 42));
  EXPECT_EQ(j["text"], "hi");
  EXPECT_EQ(j["token"], 42);
  EXPECT_FALSE(json::parse(response_delta("resp_1", "hi", std::nullopt)).contains("token"));
  GenerationEvent done;
  done.done = true;
  done.finish = FinishReason::Cancelled;
  done.usage = Usage{10, 5, 8};
  done.timings.ttft_s = 0.0125;
  done.timings.decode_s = 0.5;
  j = json::parse(response_done("resp_1", done, 15));
  EXPECT_EQ(j["response"]["finish_reason"], "cancelled");
  EXPECT_EQ(j["response"]["usage"]["cached_tokens"], 8);
  EXPECT_EQ(j["response"]["usage"]["total_tokens"], 15);
  EXPECT_DOUBLE_EQ(j["response"]["ttft_ms"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["response"]["tokens_per_s"].get<double>(), 8.0);  // 4 tokens after the first in 0.5 s
  EXPECT_EQ(j["response"]["context_tokens"], 15);
  j = json::parse(error_event("no_input", "msg", "response.create"));
  EXPECT_EQ(j["error"]["code"], "no_input");
  EXPECT_EQ(j["error"]["event"], "response.create");
}

TEST(RealtimeConversation, ContinuationIsWhatFollowsTheAssistantTurn) {
  const ChatTemplate chatml(
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
      "gguf", "", "<|im_end|>");
  // Llama 3's template (it writes bos_token before the first message).
  const ChatTemplate llama3(
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
      "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
      "gguf", "<|begin_of_text|>", "<|eot_id|>");
  const ChatTemplate plain;
  auto m = [](const char* role, const char* content) { return ChatMessage{role, content, nullptr, "", ""}; };
  const std::vector<ChatMessage> next{m("user", "again")};
  EXPECT_EQ(chat_continuation(chatml, next), "<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chat_continuation(plain, next), "\nUser: again\nAssistant:");
  EXPECT_EQ(chat_continuation(llama3, next),
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nagain<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Whole conversation == first turn + reply + continuation.
  for (const ChatTemplate* t : {&plain, &chatml, &llama3}) {
    const std::vector<ChatMessage> first{m("system", "sys"), m("user", "hello")};
    std::vector<ChatMessage> all = first;
    all.push_back(m("assistant", "reply"));
    all.push_back(m("user", "again"));
    const std::string turn1 = t->render(first);
    const std::string whole = t->render(all);
    const std::string cont = chat_continuation(*t, next);
    ASSERT_GE(whole.size(), cont.size()) << whole;
    EXPECT_EQ(whole.substr(whole.size() - cont.size()), cont) << whole;
    EXPECT_EQ(whole.substr(0, turn1.size()), turn1) << whole;
  }
}

TEST(RealtimeConversation, KeepsTokenIdsAppendOnly) {
  nexus::test::FakeBackend backend;  // Plain template; bytes + 2, BOS 1
  Conversation c(backend);
  c.set_system("S");
  c.append_input(InputItem{true, {"user", "hi"}, {}});
  EXPECT_TRUE(c.has_pending());
  const auto p1 = c.build_prompt();
  EXPECT_EQ(p1, bytes("System: S\nUser: hi\nAssistant:", true));
  EXPECT_FALSE(c.started());  // build_prompt changes nothing
  c.commit(p1);
  EXPECT_FALSE(c.has_pending());
  c.on_generated(50);
  c.on_generated(51);
  c.on_response_end();
  c.append_input(InputItem{true, {"user", "more"}, {}});
  auto expect = p1;
  expect.push_back(50);
  expect.push_back(51);
  const auto cont = bytes("\nUser: more\nAssistant:", false);
  expect.insert(expect.end(), cont.begin(), cont.end());
  const auto p2 = c.build_prompt();
  EXPECT_EQ(p2, expect);
  c.commit(p2);
  // Raw text: appended without BOS.
  c.append_input(InputItem{false, {}, " tail"});
  auto p3 = c.build_prompt();
  ASSERT_EQ(p3.size(), p2.size() + 5);
  EXPECT_TRUE(std::equal(p2.begin(), p2.end(), p3.begin()));
  EXPECT_EQ(std::vector<int32_t>(p3.begin() + static_cast<long>(p2.size()), p3.end()), bytes(" tail", false));
}

TEST(RealtimeConversation, RawTextOpeningAConversationGetsBos) {
  nexus::test::FakeBackend backend;
  Conversation c(backend);
  c.append_input(InputItem{false, {}, "Once"});
  c.append_input(InputItem{false, {}, " upon"});
  auto expect = bytes("Once", true);
  const auto more = bytes(" upon", false);
  expect.insert(expect.end(), more.begin(), more.end());
  EXPECT_EQ(c.build_prompt(), expect);
}

}  // namespace
