// The gateway's /v1/realtime relay end to end: WebSocket sessions through
// `nexus gateway` to real `nexus serve` replicas on loopback. A session's
// turns all go to one replica (its KV holds the conversation: the second
// turn sends only its new input), the answers equal those of a session
// opened on a replica directly (greedy), and when the replica dies the
// client's connection is closed (never left hanging).
#include <gtest/gtest.h>

#include <signal.h>

#include <nlohmann/json.hpp>

#include "support/gateway_load.h"
#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"
#include "support/ws_client.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

// Two greedy turns; returns the text of each and the second turn's
// input_tokens (only the new input when the conversation stayed on one
// replica).
struct Turns {
  std::string first, second;
  int64_t second_input_tokens = -1;
};

Turns two_turns(WsClient& c) {
  Turns t;
  EXPECT_EQ(c.recv_json()["type"], "session.created");
  c.send_json({{"type", "session.update"}, {"session", {{"temperature", 0}, {"max_tokens", 6}}}});
  EXPECT_EQ(c.recv_json()["type"], "session.updated");
  for (int turn = 0; turn < 2; ++turn) {
    c.send_json({{"type", "input.append"}, {"message", {{"role", "user"}, {"content", turn ? "And then?" : "Once upon a time"}}}});
    c.send_json({{"type", "response.create"}});
    const json created = c.recv_until("response.created");
    if (turn == 1) t.second_input_tokens = created["response"]["input_tokens"].get<int64_t>();
    std::string text;
    for (;;) {
      const json ev = c.recv_json();
      if (ev["type"] == "response.delta") text += ev["text"].get<std::string>();
      if (ev["type"] == "response.done" || ev["type"] == "error") break;
    }
    (turn ? t.second : t.first) = text;
  }
  return t;
}

}  // namespace

TEST(GatewayRealtime, SessionsStickToOneReplicaAndAnswerAsADirectSession) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--policy", "round-robin"});
  ASSERT_GT(gw.port, 0);

  WsClient direct("127.0.0.1", rs.ports[0]);
  const Turns want = two_turns(direct);
  ASSERT_FALSE(want.first.empty());
  for (int s = 0; s < 2; ++s) {  // round-robin: one session on each replica
    SCOPED_TRACE(s);
    WsClient c("127.0.0.1", gw.port);
    const Turns got = two_turns(c);
    EXPECT_EQ(got.first, want.first);
    EXPECT_EQ(got.second, want.second);
    EXPECT_EQ(got.second_input_tokens, want.second_input_tokens);  // the replica kept the conversation
    c.send_json({{"type", "session.close"}});
    EXPECT_EQ(c.wait_closed(), 1000);
  }
  const auto m = scrape_metrics(gw.port);
  const double a = metric_or(m, "nexus_gateway_realtime_sessions_total", {{"replica", "127.0.0.1:" + std::to_string(rs.ports[0])}});
  const double b = metric_or(m, "nexus_gateway_realtime_sessions_total", {{"replica", "127.0.0.1:" + std::to_string(rs.ports[1])}});
  std::printf("[realtime] sessions per replica: %.0f, %.0f\n", a, b);
  EXPECT_EQ(a + b, 2);
  EXPECT_EQ(metric_or(m, "nexus_gateway_realtime_sessions", {}, -1), 0);
}

namespace {

const json kSettings = {{"temperature", 0}, {"max_tokens", 24}};

json user(const std::string& text) {
  return {{"type", "input.append"}, {"message", {{"role", "user"}, {"content", text}}}};
}
json assistant(const std::string& text) {
  return {{"type", "input.append"}, {"message", {{"role", "assistant"}, {"content", text}}}};
}

// Reads one response to its response.done; returns its text and finish reason.
std::pair<std::string, std::string> read_response(WsClient& c) {
  std::string text;
  for (;;) {
    const json ev = c.recv_json();
    if (ev["type"] == "response.delta") text += ev["text"].get<std::string>();
    if (ev["type"] == "error") ADD_FAILURE() << "unexpected error event: " << ev.dump();
    if (ev["type"] == "response.done" || ev["type"] == "error")
      return {text, ev.contains("response") ? ev["response"]["finish_reason"].get<std::string>() : "error"};
  }
}

std::string turn(WsClient& c, const std::string& input) {
  c.send_json(user(input));
  c.send_json({{"type", "response.create"}});
  EXPECT_EQ(c.recv_until("response.created")["type"], "response.created");
  return read_response(c).first;
}

// A new session's first events: session.created, then kSettings applied.
void open_session(WsClient& c) {
  EXPECT_EQ(c.recv_json()["type"], "session.created");
  c.send_json({{"type", "session.update"}, {"session", kSettings}});
  EXPECT_EQ(c.recv_json()["type"], "session.updated");
}

// A new session on replica `port` given `conversation`, then one response.
std::string fresh_session_answer(uint16_t port, const std::vector<json>& conversation) {
  WsClient c("127.0.0.1", port);
  open_session(c);
  for (const json& e : conversation) c.send_json(e);
  c.send_json({{"type", "response.create"}});
  EXPECT_EQ(c.recv_until("response.created")["type"], "response.created");
  return read_response(c).first;
}

// The replica index holding the gateway's one realtime session so far.
size_t session_replica(const ReplicaSet& rs, uint16_t gateway_port) {
  const auto m = scrape_metrics(gateway_port);
  for (size_t i = 0; i < rs.ports.size(); ++i)
    if (metric_or(m, "nexus_gateway_realtime_sessions_total", {{"replica", "127.0.0.1:" + std::to_string(rs.ports[i])}}) > 0)
      return i;
  ADD_FAILURE() << "no replica holds the session";
  return 0;
}

// The events the client gets when its session moves: an error event saying
// so, then the new session's session.created (its session.updated, the
// replayed settings, may follow).
void expect_moved(WsClient& c) {
  const json err = c.recv_json();
  ASSERT_EQ(err["type"], "error") << err.dump();
  EXPECT_EQ(err["error"]["code"], "replica_failed");
  EXPECT_EQ(c.recv_json()["type"], "session.created");
}

}  // namespace

// Issue 21's acceptance: a session whose replica is killed between turns
// goes on on another replica, and the next turn's answer equals a fresh
// session's given the same conversation (greedy). Twice: the client waits
// for the move before its next turn, and it sends the turn at once (the
// gateway then replays the turn it had asked for).
TEST(GatewayRealtime, ASessionWhoseReplicaIsKilledBetweenTurnsGoesOnWithTheConversation) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  for (const bool wait_for_move : {true, false}) {
    SCOPED_TRACE(wait_for_move ? "the client waits for the move" : "the next turn is sent at once");
    ReplicaSet rs(model, 2);
    ASSERT_TRUE(rs.all_started());
    GatewayProcess gw(rs.ports);
    ASSERT_GT(gw.port, 0);
    WsClient c("127.0.0.1", gw.port);
    open_session(c);
    const std::string first = turn(c, "Once upon a time");
    ASSERT_FALSE(first.empty());
    const size_t dead = session_replica(rs, gw.port);
    ASSERT_EQ(rs.servers[dead]->proc.stop(SIGKILL), 128 + SIGKILL);
    if (wait_for_move) expect_moved(c);
    c.send_json(user("And then?"));
    c.send_json({{"type", "response.create"}});
    if (!wait_for_move) {
      // The replay's own events (error, session.created, session.updated)
      // come before the turn's answer.
      std::vector<json> before;
      c.recv_until("response.created", &before);
      ASSERT_GE(before.size(), 2u);
      EXPECT_EQ(before[0]["type"], "error");
      EXPECT_EQ(before[0]["error"]["code"], "replica_failed");
      EXPECT_EQ(before[1]["type"], "session.created");
    } else {
      c.recv_until("response.created");
    }
    const std::string second = read_response(c).first;
    const std::string want =
        fresh_session_answer(rs.ports[1 - dead], {user("Once upon a time"), assistant(first), user("And then?")});
    EXPECT_EQ(second, want);
    EXPECT_FALSE(want.empty());
    // The replay carried the first answer: without it the turn differs.
    EXPECT_NE(want, fresh_session_answer(rs.ports[1 - dead], {user("Once upon a time"), user("And then?")}));
    // And on: a third turn on the new replica.
    EXPECT_FALSE(turn(c, "The end.").empty());
    const auto m = scrape_metrics(gw.port);
    EXPECT_EQ(metric_or(m, "nexus_gateway_realtime_failovers_total", {{"result", "resumed"}}), 1);
    EXPECT_EQ(metric_or(m, "nexus_gateway_realtime_sessions", {}, -1), 1);
    c.send_json({{"type", "session.close"}});
    EXPECT_EQ(c.wait_closed(), 1000);
  }
}

// Killed mid-response: the response ends with response.done (error) after
// the text the client got, and the conversation goes on with that text.
TEST(GatewayRealtime, AResponseCutByTheReplicasDeathEndsAndTheSessionGoesOn) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  WsClient c("127.0.0.1", gw.port);
  open_session(c);
  const size_t dead = session_replica(rs, gw.port);
  // 2000 tokens take the replica ~0.1 s; it is killed at the first delta.
  c.send_json(user("Once upon a time"));
  c.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 2000}, {"ignore_eos", true}}}});
  c.recv_until("response.created");
  const json first = c.recv_json();
  ASSERT_EQ(first["type"], "response.delta") << first.dump();
  ASSERT_EQ(rs.servers[dead]->proc.stop(SIGKILL), 128 + SIGKILL);
  std::string partial = first["text"].get<std::string>();
  const auto [rest, finish] = read_response(c);
  partial += rest;
  EXPECT_EQ(finish, "error");
  const size_t alive = 1 - dead;
  expect_moved(c);
  EXPECT_EQ(turn(c, "And then?"),
            fresh_session_answer(rs.ports[alive], {user("Once upon a time"), assistant(partial), user("And then?")}));
}

TEST(GatewayRealtime, ReplicaDeathWithNoReplicaLeftEndsTheSessionWithAnError) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  WsClient c("127.0.0.1", gw.port, "/v1/realtime", std::chrono::seconds(10));
  EXPECT_EQ(c.recv_json()["type"], "session.created");
  ASSERT_EQ(rs.servers[0]->proc.stop(SIGKILL), 128 + SIGKILL);
  EXPECT_EQ(c.recv_json()["error"]["code"], "replica_failed");
  const json last = c.recv_json();
  EXPECT_EQ(last["error"]["code"], "no_replica_available") << last.dump();
  EXPECT_EQ(c.wait_closed(), 1011);  // bounded by the client's timeout: no hang
  EXPECT_EQ(metric_or(scrape_metrics(gw.port), "nexus_gateway_realtime_failovers_total", {{"result", "ended"}}), 1);
  // A new session now finds no replica: an HTTP error, not a hang.
  EXPECT_THROW(WsClient("127.0.0.1", gw.port, "/v1/realtime", std::chrono::seconds(10)), std::exception);
}
