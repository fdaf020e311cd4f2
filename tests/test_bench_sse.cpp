// nexus bench client side of streaming: the SSE parser (split anywhere), the
// OpenAI chunk interpretation and the request body (src/loadgen/).
#include <gtest/gtest.h>

#include "loadgen/api_wire.h"
#include "loadgen/http_transport.h"
#include "loadgen/openai_stream.h"
#include "loadgen/sse_parser.h"

using namespace nexus::loadgen;
using nlohmann::json;

namespace {

// A stream exercising the parsing rules: CRLF, CR and LF line ends, a
// comment, a field without a space, multi-line data, an event name, an
// event without data (not dispatched), unknown fields.
const std::string kStream =
    "\xEF\xBB\xBF: keep-alive comment\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "data:{\"b\":2}\n\n"
    "event: custom\rdata: line1\rdata: line2\r\r"
    "id: 7\nretry: 100\n\n"
    "data\n\n"
    "foo: bar\ndata:  two spaces\n\n"
    "data: [DONE]\n\n";

const std::vector<SseEvent> kExpected = {
    {"", "{\"a\":1}"}, {"", "{\"b\":2}"}, {"custom", "line1\nline2"}, {"", ""}, {"", " two spaces"}, {"", "[DONE]"},
};

void expect_events(const std::vector<SseEvent>& got, const std::string& context) {
  ASSERT_EQ(got.size(), kExpected.size()) << context;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].event, kExpected[i].event) << context << " event " << i;
    EXPECT_EQ(got[i].data, kExpected[i].data) << context << " event " << i;
  }
}

TEST(BenchSse, WholeStream) {
  SseParser p;
  std::vector<SseEvent> out;
  p.feed(kStream, out);
  expect_events(out, "whole");
  EXPECT_FALSE(p.pending());
}

TEST(BenchSse, SplitAtEveryPairOfBoundaries) {
  for (size_t i = 0; i <= kStream.size(); ++i) {
    for (size_t j = i; j <= kStream.size(); ++j) {
      SseParser p;
      std::vector<SseEvent> out;
      p.feed(std::string_view(kStream).substr(0, i), out);
      p.feed(std::string_view(kStream).substr(i, j - i), out);
      p.feed(std::string_view(kStream).substr(j), out);
      expect_events(out, "split at " + std::to_string(i) + "," + std::to_string(j));
      if (HasFailure()) return;
    }
  }
}

TEST(BenchSse, ByteByByteEventsCompleteOnTheBlankLine) {
  const std::string s = "data: x\r\n\r\ndata: y\n\n";
  SseParser p;
  std::vector<SseEvent> out;
  for (size_t i = 0; i < s.size(); ++i) {
    p.feed(s.substr(i, 1), out);
    // The first event is out exactly when its blank line's CR arrives.
    EXPECT_EQ(out.size(), i < 9 ? 0u : i < s.size() - 1 ? 1u : 2u) << i;
  }
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, "x");
  EXPECT_EQ(out[1].data, "y");
}

TEST(BenchSse, TruncatedStreamIsPending) {
  SseParser p;
  std::vector<SseEvent> out;
  p.feed("data: {\"a\"", out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(p.pending());
  p.feed(":1}\n", out);
  EXPECT_TRUE(p.pending());  // data without its blank line
  p.feed("\n", out);
  EXPECT_FALSE(p.pending());
  ASSERT_EQ(out.size(), 1u);
}

TEST(BenchChunk, CompletionChatUsageDoneAndErrors) {
  const ChunkInfo c = interpret_chunk(R"({"choices":[{"index":0,"text":"Once","finish_reason":null}],"usage":null})");
  EXPECT_EQ(c.text, "Once");
  EXPECT_FALSE(c.completion_tokens.has_value());
  EXPECT_FALSE(c.done || c.malformed || c.error);

  EXPECT_EQ(interpret_chunk(R"({"choices":[{"delta":{"content":" upon"}}]})").text, " upon");
  EXPECT_EQ(interpret_chunk(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})").text, "");
  EXPECT_EQ(interpret_chunk(R"({"choices":[{"delta":{},"finish_reason":"length"}]})").text, "");

  const ChunkInfo u = interpret_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}})");
  EXPECT_EQ(u.prompt_tokens, 12);
  EXPECT_EQ(u.completion_tokens, 8);
  EXPECT_EQ(u.text, "");

  EXPECT_TRUE(interpret_chunk("[DONE]").done);
  const ChunkInfo e = interpret_chunk(R"({"error":{"message":"generation failed: boom","type":"server_error"}})");
  ASSERT_TRUE(e.error.has_value());
  EXPECT_EQ(*e.error, "generation failed: boom");
  EXPECT_TRUE(interpret_chunk("{not json").malformed);
  EXPECT_TRUE(interpret_chunk("[1,2]").malformed);
  EXPECT_EQ(interpret_chunk(R"({"choices":[{"text":5}]})").text, "");  // wrong type: no text
}

TEST(BenchRequestBody, StreamsWithUsageAndOptionalFields) {
  RequestSpec r;
  r.api = Api::Completions;
  r.prompt = "Once upon";
  r.max_tokens = 8;
  r.ignore_eos = true;
  r.model = "stories260K";
  json b = request_body(r, json::object());
  EXPECT_EQ(b["prompt"], "Once upon");
  EXPECT_EQ(b["max_tokens"], 8);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_EQ(b["model"], "stories260K");
  EXPECT_FALSE(b.contains("messages"));

  r.api = Api::Chat;
  r.messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  r.ignore_eos = false;
  r.model.clear();
  b = request_body(r, json{{"temperature", 0}, {"max_tokens", 3}});
  EXPECT_EQ(b["messages"][0]["content"], "Hi");
  EXPECT_FALSE(b.contains("prompt"));
  EXPECT_FALSE(b.contains("model"));
  EXPECT_FALSE(b.contains("ignore_eos"));
  EXPECT_EQ(b["temperature"], 0);
  EXPECT_EQ(b["max_tokens"], 3);  // the extra body wins

  ServerUrl u;
  u.host = "h";
  u.base_path = "/p";
  EXPECT_EQ(request_target(u, Api::Chat), "/p/v1/chat/completions");
  EXPECT_EQ(request_target(u, Api::Completions), "/p/v1/completions");
  EXPECT_EQ(request_target(u, Api::Responses), "/p/v1/responses");
  EXPECT_EQ(request_target(u, Api::Messages), "/p/v1/messages");
}

TEST(BenchRequestBody, TheAgentProtocolsCarryTheMessagesInTheirOwnShape) {
  RequestSpec r;
  r.messages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                            {{"role", "user"}, {"content", "Hi"}},
                            {{"role", "assistant"}, {"content", "Hello"}},
                            {{"role", "user"}, {"content", "Bye"}}});
  r.max_tokens = 5;
  r.model = "m";
  r.ignore_eos = true;
  r.api = Api::Responses;
  json b = request_body(r, json::object());
  EXPECT_EQ(b["max_output_tokens"], 5);
  EXPECT_EQ(b["stream"], true);
  EXPECT_FALSE(b.contains("max_tokens"));
  ASSERT_EQ(b["input"].size(), 4u);
  EXPECT_EQ(b["input"][0], json({{"type", "message"}, {"role", "system"}, {"content", "You are terse."}}));
  EXPECT_EQ(b["input"][3]["content"], "Bye");
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_EQ(b["model"], "m");

  r.api = Api::Messages;
  b = request_body(r, json::object());
  EXPECT_EQ(b["system"], "You are terse.");  // beside the messages, as Anthropic takes it
  ASSERT_EQ(b["messages"].size(), 3u);
  EXPECT_EQ(b["messages"][0]["role"], "user");
  EXPECT_EQ(b["max_tokens"], 5);
}

TEST(BenchStreamEvents, ResponsesAndMessagesEventsGiveTextUsageAndTheirEnd) {
  EXPECT_EQ(interpret_event(Api::Responses, R"({"type":"response.output_text.delta","delta":"Once","sequence_number":4})").text,
            "Once");
  EXPECT_FALSE(interpret_event(Api::Responses, R"({"type":"response.created","response":{"id":"r"}})").done);
  const ChunkInfo done = interpret_event(
      Api::Responses, R"({"type":"response.completed","response":{"id":"r","usage":{"input_tokens":12,"output_tokens":3,)"
                      R"("input_tokens_details":{"cached_tokens":8}}}})");
  EXPECT_TRUE(done.done);
  EXPECT_EQ(done.prompt_tokens, 12);
  EXPECT_EQ(done.completion_tokens, 3);
  EXPECT_EQ(done.cached_tokens, 8);
  EXPECT_TRUE(interpret_event(Api::Responses, R"({"type":"response.incomplete","response":{"usage":null}})").done);
  const ChunkInfo failed = interpret_event(
      Api::Responses, R"({"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}})");
  EXPECT_TRUE(failed.done);
  EXPECT_EQ(failed.error, "server_error: boom");

  EXPECT_EQ(interpret_event(Api::Messages, R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" upon"}})").text,
            " upon");
  EXPECT_EQ(interpret_event(Api::Messages, R"({"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{"}})").text,
            "");
  const ChunkInfo start = interpret_event(
      Api::Messages, R"({"type":"message_start","message":{"usage":{"input_tokens":4,"cache_read_input_tokens":6}}})");
  EXPECT_EQ(start.prompt_tokens, 10);  // Anthropic's input_tokens leaves the cached ones out
  EXPECT_EQ(start.cached_tokens, 6);
  EXPECT_EQ(interpret_event(Api::Messages, R"({"type":"message_delta","usage":{"output_tokens":7}})").completion_tokens, 7);
  EXPECT_TRUE(interpret_event(Api::Messages, R"({"type":"message_stop"})").done);
  EXPECT_EQ(interpret_event(Api::Messages, R"({"type":"error","error":{"type":"overloaded_error","message":"busy"}})").error,
            "busy");
  EXPECT_TRUE(interpret_event(Api::Messages, "{nope").malformed);
}

}  // namespace
