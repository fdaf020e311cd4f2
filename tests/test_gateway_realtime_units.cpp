// The pure parts of the gateway's realtime failover: the WebSocket frame
// reader and encoder (RFC 6455 section 5), and the session transcript that
// a new replica is given (realtime_transcript.h).
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "gateway/realtime_transcript.h"
#include "server/ws_frames.h"

using namespace nexus::gateway;
using namespace nexus::server;
using nlohmann::json;

namespace {

struct Seen {
  std::vector<WsMessage> messages;
  std::vector<size_t> ends;
  WsFrameReader::OnMessage collect() {
    return [this](WsMessage& m, size_t end) {
      messages.push_back(m);
      ends.push_back(end);
    };
  }
};

// A frame with FIN as given (the encoder writes whole messages only).
std::string frame(uint8_t first_byte, std::string_view payload, std::optional<uint32_t> mask) {
  std::string f = encode_ws_frame(WsOpcode::Text, payload, mask);
  f[0] = static_cast<char>(first_byte);
  return f;
}

}  // namespace

TEST(GatewayWsFrames, ReadsMaskedAndUnmaskedFramesOfEveryLengthForm) {
  for (const size_t n : {0, 5, 125, 126, 65535, 65536, 200000}) {
    SCOPED_TRACE(n);
    std::string payload(n, 'x');
    for (size_t i = 0; i < n; ++i) payload[i] = static_cast<char>('a' + i % 26);
    for (const std::optional<uint32_t> mask : {std::optional<uint32_t>{}, std::optional<uint32_t>{0xa1b2c3d4}}) {
      const std::string f = encode_ws_frame(WsOpcode::Text, payload, mask);
      EXPECT_EQ(f.size(), payload.size() + 2 + (n < 126 ? 0 : n <= 65535 ? 2 : 8) + (mask ? 4 : 0));
      // Fed whole, and one byte at a time (every split point of a header).
      for (const size_t step : {f.size(), size_t{1}, size_t{7}}) {
        WsFrameReader r(1 << 20);
        Seen seen;
        for (size_t at = 0; at < f.size(); at += step) ASSERT_TRUE(r.feed(std::string_view(f).substr(at, step), seen.collect()));
        ASSERT_EQ(seen.messages.size(), 1u);
        EXPECT_EQ(seen.messages[0].payload, payload);
        EXPECT_TRUE(r.at_message_boundary());
        if (step == f.size()) EXPECT_EQ(seen.ends[0], f.size());
      }
    }
  }
}

TEST(GatewayWsFrames, ReassemblesFragmentsAroundControlFramesAndReportsEnds) {
  const std::string a = frame(0x01, "{\"type\":", 0x01020304);   // text, not FIN
  const std::string ping = encode_ws_frame(WsOpcode::Ping, "p", 0x05060708);
  const std::string b = frame(0x80, "\"x\"}", 0x0a0b0c0d);       // continuation, FIN
  const std::string c = encode_ws_frame(WsOpcode::Text, "next", 0x11111111);
  const std::string stream = a + ping + b + c;
  WsFrameReader r(1 << 20);
  Seen seen;
  ASSERT_TRUE(r.feed(std::string_view(stream).substr(0, a.size() + 1), seen.collect()));
  EXPECT_FALSE(r.at_message_boundary());
  ASSERT_TRUE(r.feed(std::string_view(stream).substr(a.size() + 1), seen.collect()));
  ASSERT_EQ(seen.messages.size(), 3u);
  EXPECT_EQ(seen.messages[0].opcode, WsOpcode::Ping);
  EXPECT_EQ(seen.messages[1].payload, "{\"type\":\"x\"}");
  EXPECT_EQ(seen.messages[2].payload, "next");
  // Offsets are within the second feed: the whole message ends after b.
  EXPECT_EQ(seen.ends[1], a.size() + ping.size() + b.size() - (a.size() + 1));
  EXPECT_EQ(seen.ends[2], stream.size() - (a.size() + 1));
}

TEST(GatewayWsFrames, DropsThePayloadOfMessagesPastTheLimitAndFailsOnBrokenFraming) {
  WsFrameReader r(10);
  Seen seen;
  ASSERT_TRUE(r.feed(encode_ws_frame(WsOpcode::Text, std::string(11, 'y'), 7u) + encode_ws_frame(WsOpcode::Text, "ok", 9u),
                     seen.collect()));
  ASSERT_EQ(seen.messages.size(), 2u);
  EXPECT_TRUE(seen.messages[0].too_large);
  EXPECT_TRUE(seen.messages[0].payload.empty());
  EXPECT_EQ(seen.messages[1].payload, "ok");
  const auto fails = [](std::string bytes) {
    WsFrameReader r(100);
    Seen seen;
    return !r.feed(bytes, seen.collect()) && r.failed();
  };
  EXPECT_TRUE(fails(frame(0xc1, "x", {})));           // RSV1: permessage-deflate
  EXPECT_TRUE(fails(frame(0x83, "x", {})));           // reserved opcode
  EXPECT_TRUE(fails(frame(0x80, "x", {})));           // continuation with nothing to continue
  EXPECT_TRUE(fails(std::string("\x09\x01p", 3)));    // a fragmented control frame
  EXPECT_TRUE(fails(std::string("\x81\x7f\x80\x00\x00\x00\x00\x00\x00\x01", 10)));  // 64-bit length, top bit set
  EXPECT_TRUE(fails(frame(0x01, "a", {}) + frame(0x81, "b", {})));  // a new message inside a fragmented one
}

namespace {

json ev(std::string_view type, json fields = json::object()) {
  fields["type"] = type;
  return fields;
}
json user(std::string text) { return ev("input.append", {{"message", {{"role", "user"}, {"content", std::move(text)}}}}); }

// A replica's side of one response: created, deltas, done.
void respond(RealtimeTranscript& t, const std::string& id, std::initializer_list<std::string> deltas,
             bool done = true) {
  t.on_server_event(ev("response.created", {{"response", {{"id", id}}}}).dump());
  for (const auto& d : deltas) t.on_server_event(ev("response.delta", {{"response_id", id}, {"text", d}}).dump());
  if (done) t.on_server_event(ev("response.done", {{"response", {{"id", id}, {"finish_reason", "stop"}}}}).dump());
}

std::vector<json> replay_json(RealtimeTranscript& t) {
  std::vector<json> out;
  for (const auto& e : t.replay()) out.push_back(json::parse(e));
  return out;
}

}  // namespace

TEST(GatewayRealtimeTranscript, ReplaysSettingsAndTheConversationWithAnswersAsAssistantMessages) {
  RealtimeTranscript t;
  t.on_server_event(ev("session.created", {{"session", {{"id", "s1"}}}}).dump());
  t.on_client_event(ev("session.update", {{"session", {{"temperature", 0}, {"max_tokens", 6}}}}).dump());
  t.on_server_event(
      ev("session.updated", {{"session", {{"id", "s1"}, {"system", "Be brief."}, {"temperature", 0}, {"max_tokens", 6}}}}).dump());
  t.on_client_event(user("Once upon a time").dump());
  t.on_client_event(ev("response.create").dump());
  respond(t, "r1", {" there", " was"});
  t.on_client_event(user("And then?").dump());
  EXPECT_FALSE(t.lost());
  const auto r = replay_json(t);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], ev("session.update", {{"session", {{"system", "Be brief."}, {"temperature", 0}, {"max_tokens", 6}}}}));
  EXPECT_EQ(r[1], user("Once upon a time"));
  EXPECT_EQ(r[2], ev("input.append", {{"message", {{"role", "assistant"}, {"content", " there was"}}}}));
  EXPECT_EQ(r[3], user("And then?"));
}

TEST(GatewayRealtimeTranscript, ATurnAskedForAndNotAnsweredIsAskedAgainInItsPlace) {
  RealtimeTranscript t;
  t.on_client_event(ev("input.append", {{"text", "Once"}}).dump());
  t.on_client_event(ev("response.create", {{"response", {{"max_tokens", 2}}}}).dump());
  respond(t, "r1", {" upon"});
  t.on_client_event(ev("input.append", {{"text", " a"}}).dump());
  t.on_client_event(ev("response.create").dump());  // the replica dies before answering
  t.on_client_event(ev("input.append", {{"text", " later"}}).dump());
  const auto r = replay_json(t);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0], ev("input.append", {{"text", "Once"}}));
  EXPECT_EQ(r[1], ev("input.append", {{"text", " upon"}}));  // raw text after raw text
  EXPECT_EQ(r[2], ev("input.append", {{"text", " a"}}));
  EXPECT_EQ(r[3], ev("response.create"));
  EXPECT_EQ(r[4], ev("input.append", {{"text", " later"}}));
}

TEST(GatewayRealtimeTranscript, ARunningResponseKeepsItsTextAndInputSentMeanwhileComesAfterIt) {
  RealtimeTranscript t;
  t.on_client_event(user("a").dump());
  t.on_client_event(ev("response.create").dump());
  respond(t, "r1", {"x", "y"}, /*done=*/false);
  t.on_client_event(user("b").dump());  // queued while r1 runs
  ASSERT_TRUE(t.running_response());
  EXPECT_EQ(*t.running_response(), "r1");
  const auto r = replay_json(t);  // the replica died mid-response
  EXPECT_FALSE(t.running_response());
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1], ev("input.append", {{"message", {{"role", "assistant"}, {"content", "xy"}}}}));
  EXPECT_EQ(r[2], user("b"));
}

TEST(GatewayRealtimeTranscript, RedirectsAndRefusalsFollowTheServer) {
  RealtimeTranscript t;
  t.on_client_event(user("a").dump());
  t.on_client_event(ev("response.create").dump());
  respond(t, "r1", {"x"}, /*done=*/false);
  t.on_client_event(ev("response.redirect", {{"message", {{"role", "user"}, {"content", "b"}}}}).dump());
  t.on_server_event(ev("response.done", {{"response", {{"id", "r1"}, {"finish_reason", "cancelled"}}}}).dump());
  respond(t, "r2", {"z"});
  // Refused events never enter: an invalid one (the server's own parser),
  // and input a template refused (the server discards the queued input).
  t.on_client_event(R"({"type":"input.append","message":{"role":"narrator","content":"c"}})");
  t.on_client_event(user("d").dump());
  t.on_client_event(ev("response.create").dump());
  t.on_server_event(ev("error", {{"error", {{"code", "chat_template_rejected"}, {"event", "response.create"}}}}).dump());
  // A session.update the replica refused is not replayed.
  t.on_client_event(ev("session.update", {{"session", {{"temperature", -1}}}}).dump());
  t.on_server_event(ev("error", {{"error", {{"code", "invalid_value"}, {"event", "session.update"}}}}).dump());
  const auto r = replay_json(t);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], user("a"));
  EXPECT_EQ(r[1], ev("input.append", {{"message", {{"role", "assistant"}, {"content", "x"}}}}));
  EXPECT_EQ(r[2], user("b"));
  EXPECT_EQ(r[3], ev("input.append", {{"message", {{"role", "assistant"}, {"content", "z"}}}}));
}

TEST(GatewayRealtimeTranscript, IsLostWhereTheGatewayCannotKnowWhatTheReplicaKept) {
  for (const char* code : {"input_too_large", "message_too_large", "slow_consumer"}) {
    RealtimeTranscript t;
    t.on_client_event(user("a").dump());
    t.on_server_event(ev("error", {{"error", {{"code", code}}}}).dump());
    EXPECT_TRUE(t.lost()) << code;
  }
  RealtimeTranscript small(64);
  small.on_client_event(user(std::string(100, 'x')).dump());
  EXPECT_TRUE(small.lost());
  RealtimeTranscript closing;
  closing.on_client_event(ev("session.close").dump());
  EXPECT_TRUE(closing.closing());
}
