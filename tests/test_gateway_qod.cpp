// The gateway contains a query of death (issue 42; docs/gateway.md "Query of
// death"): three replicas run as nexus_faulty (tests/faulty/), whose
// process aborts on any request body or realtime message holding
// kQueryOfDeath, as a replica does on a request that hits a crash bug.
// A request (or a realtime session's message) that kills its replica kills
// at most one more; the client gets 502 / an error event `query_of_death`,
// the third replica keeps serving, and the same request sent again is
// refused without reaching any replica.
#include <gtest/gtest.h>

#include <signal.h>

#include <array>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/gateway_load.h"
#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"
#include "support/ws_client.h"

using namespace nexus::test;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr const char* kQueryOfDeath = "QUERY-OF-DEATH";
const json kNormal = {{"prompt", "Once upon a time"}, {"max_tokens", 8}};

struct FaultyReplicas : ReplicaSet {
  explicit FaultyReplicas(const std::string& model)
      : ReplicaSet(model, 3, {}, NEXUS_FAULTY_BINARY, {"--crash-on-body", kQueryOfDeath}) {}
  // The replicas whose process ended (each waited for up to `wait`), by
  // index; the exit status of each must be SIGABRT's.
  std::vector<size_t> dead(milliseconds wait = milliseconds(3000)) {
    std::vector<size_t> out;
    for (size_t i = 0; i < servers.size(); ++i) {
      if (exited[i]) {
        out.push_back(i);
        continue;
      }
      const int rc = servers[i]->proc.stop(0, wait);
      if (rc == -1) continue;  // still running
      EXPECT_EQ(rc, 128 + SIGABRT) << "replica " << i;
      exited[i] = true;
      out.push_back(i);
    }
    return out;
  }
  std::array<bool, 3> exited{};
};

double routed(uint16_t gw_port, const std::vector<uint16_t>& ports) {
  const auto m = scrape_metrics(gw_port);
  double n = 0;
  for (uint16_t p : ports)
    n += metric_or(m, "nexus_gateway_routing_decisions_total", {{"replica", "127.0.0.1:" + std::to_string(p)}});
  return n;
}

}  // namespace

TEST(GatewayQueryOfDeath, ARequestThatCrashesReplicasKillsTwoAndIsThenRefused) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  FaultyReplicas rs(model);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  BackgroundTraffic normal(gw.port);
  std::this_thread::sleep_for(milliseconds(200));

  HttpClient c("127.0.0.1", gw.port, std::chrono::seconds(30));
  const json qod = {{"prompt", std::string("Once upon a time ") + kQueryOfDeath}, {"max_tokens", 8}};
  const HttpResponse first = c.post("/v1/completions", qod.dump());
  EXPECT_EQ(first.status, 502) << first.body;
  EXPECT_EQ(error_of(first.body).value("code", ""), "query_of_death") << first.body;
  EXPECT_EQ(error_of(first.body).value("type", ""), "server_error") << first.body;
  const std::vector<size_t> dead = rs.dead();
  ASSERT_EQ(dead.size(), 2u) << "the query of death went to more (or fewer) than two replicas";
  const size_t alive = 3 - dead[0] - dead[1];
  EXPECT_TRUE(answers_health(rs.ports[alive]));

  // Normal traffic went on, and goes on, on the third replica.
  normal.finish();
  EXPECT_GE(normal.ok, 1);
  EXPECT_EQ(normal.failed, 0);
  EXPECT_LE(normal.query_of_death, 2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c.post("/v1/completions", kNormal.dump()).status, 200);

  // Sent again: refused by the gateway, no replica tried.
  const double routed_before = routed(gw.port, rs.ports);
  const HttpResponse again = c.post("/v1/completions", qod.dump());
  EXPECT_EQ(again.status, 502) << again.body;
  EXPECT_EQ(error_of(again.body).value("code", ""), "query_of_death") << again.body;
  EXPECT_EQ(routed(gw.port, rs.ports), routed_before);
  EXPECT_TRUE(answers_health(rs.ports[alive]));
  const auto m = scrape_metrics(gw.port);
  // (A normal request answered with it was detected as one too.)
  EXPECT_EQ(metric_or(m, "nexus_gateway_query_of_death_total", {{"result", "detected"}}), 1 + normal.query_of_death);
  EXPECT_EQ(metric_or(m, "nexus_gateway_query_of_death_total", {{"result", "refused"}}), 1);
  EXPECT_TRUE(answers_health(gw.port));
  EXPECT_EQ(rs.dead(milliseconds(100)).size(), 2u);
}

// The same through a realtime session's failover: the message that killed
// its replica is replayed once, to a second replica (it may have been that
// replica's death, not the message's); when that one dies too before
// answering anything past the replay, the session ends with
// `query_of_death` instead of moving to the third. A new session that sends
// the same message is ended before any replica gets it.
TEST(GatewayQueryOfDeath, ARealtimeMessageThatCrashesReplicasIsNotReplayedToAThird) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  FaultyReplicas rs(model);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  BackgroundTraffic normal(gw.port);
  const json poison = {{"type", "input.append"},
                       {"message", {{"role", "user"}, {"content", std::string("Once upon a time ") + kQueryOfDeath}}}};
  {
    WsClient s("127.0.0.1", gw.port, "/v1/realtime", std::chrono::seconds(20));
    EXPECT_EQ(s.recv_json()["type"], "session.created");
    s.send_json({{"type", "session.update"}, {"session", {{"temperature", 0}, {"max_tokens", 8}}}});
    EXPECT_EQ(s.recv_json()["type"], "session.updated");
    s.send_json(poison);
    std::vector<json> before;
    json last;
    for (int i = 0; i < 10; ++i) {  // replica_failed, session.created, session.updated, then the end
      last = s.recv_json();
      if (last["type"] == "error" && last["error"]["code"] == "query_of_death") break;
      before.push_back(last);
    }
    EXPECT_EQ(last["error"]["code"], "query_of_death") << last.dump();
    ASSERT_GE(before.size(), 2u);
    EXPECT_EQ(before[0]["error"]["code"], "replica_failed") << before[0].dump();
    EXPECT_EQ(before[1]["type"], "session.created") << before[1].dump();
    EXPECT_EQ(s.wait_closed(), 1011);
  }
  const std::vector<size_t> dead = rs.dead();
  ASSERT_EQ(dead.size(), 2u) << "the message went to more (or fewer) than two replicas";
  const size_t alive = 3 - dead[0] - dead[1];
  {
    WsClient s("127.0.0.1", gw.port, "/v1/realtime", std::chrono::seconds(20));
    EXPECT_EQ(s.recv_json()["type"], "session.created");
    s.send_json(poison);
    const json ev = s.recv_json();
    EXPECT_EQ(ev["type"], "error") << ev.dump();
    EXPECT_EQ(ev["error"]["code"], "query_of_death") << ev.dump();
    EXPECT_EQ(s.wait_closed(), 1011);
  }
  EXPECT_TRUE(answers_health(rs.ports[alive]));
  normal.finish();
  EXPECT_GE(normal.ok, 1);
  EXPECT_EQ(normal.failed, 0);
  EXPECT_LE(normal.query_of_death, 2);
  const auto m = scrape_metrics(gw.port);
  EXPECT_EQ(metric_or(m, "nexus_gateway_query_of_death_total", {{"result", "detected"}}), 1 + normal.query_of_death);
  EXPECT_EQ(metric_or(m, "nexus_gateway_query_of_death_total", {{"result", "refused"}}), 1);
  // A normal session on the third replica.
  {
    WsClient s("127.0.0.1", gw.port, "/v1/realtime", std::chrono::seconds(20));
    EXPECT_EQ(s.recv_json()["type"], "session.created");
    s.send_json({{"type", "input.append"}, {"message", {{"role", "user"}, {"content", "Once upon a time"}}}});
    s.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 4}, {"ignore_eos", true}}}});
    EXPECT_EQ(s.recv_until("response.done")["response"]["finish_reason"], "length");
  }
  HttpClient c("127.0.0.1", gw.port);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.post("/v1/completions", kNormal.dump()).status, 200);
  EXPECT_EQ(rs.dead(milliseconds(100)).size(), 2u);
}
