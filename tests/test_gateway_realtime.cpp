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

TEST(GatewayRealtime, ReplicaDeathClosesTheClientsConnection) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  WsClient c("127.0.0.1", gw.port, "/v1/realtime", std::chrono::seconds(10));
  EXPECT_EQ(c.recv_json()["type"], "session.created");
  ASSERT_EQ(rs.servers[0]->proc.stop(SIGKILL), 128 + SIGKILL);
  EXPECT_EQ(c.wait_closed(), -1);  // the TCP connection ended (no hang: bounded by the client's timeout)
  // A new session now finds no replica: an HTTP error, not a hang.
  EXPECT_THROW(WsClient("127.0.0.1", gw.port, "/v1/realtime", std::chrono::seconds(10)), std::exception);
}
