// The agent protocols through `nexus gateway` to real `nexus serve`
// replicas on loopback: POST /v1/responses (a continuation by
// previous_response_id under the prefix policy, where the agent's
// prompt_cache_key keeps it on the replica that stored the first response)
// and POST /v1/messages answer as a replica does directly (greedy); the
// Responses WebSocket mode is relayed, and a Codex-like connection whose
// replica is killed between two requests goes on on another replica, its
// next answer equal to a fresh connection's given the same history.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/gateway_load.h"
#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"
#include "support/ws_client.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

json message(const std::string& role, const std::string& text) {
  return {{"type", "message"}, {"role", role}, {"content", {{{"type", "input_text"}, {"text", text}}}}};
}

// Sends a response.create; returns its final event (response.completed,
// .incomplete, .failed or an error), the others appended to `events`.
json create(WsClient& ws, json body, std::vector<json>* events = nullptr) {
  body["type"] = "response.create";
  ws.send_json(body);
  for (;;) {
    json ev = ws.recv_json();
    const std::string type = ev.value("type", "");
    if (type == "response.completed" || type == "response.incomplete" || type == "response.failed" || type == "error")
      return ev;
    if (events) events->push_back(std::move(ev));
  }
}

// A create's last event is an answer: completed, or cut by max_output_tokens.
bool answered(const json& final_event) {
  return final_event["type"] == "response.completed" || final_event["type"] == "response.incomplete";
}

std::string output_text(const json& final_event) {
  std::string text;
  for (const auto& item : final_event["response"]["output"])
    if (item["type"] == "message")
      for (const auto& part : item["content"]) text += part["text"].get<std::string>();
  return text;
}

// The replica index whose responses_ws sessions counter moved.
size_t ws_replica(const ReplicaSet& rs, uint16_t gateway_port) {
  const auto m = scrape_metrics(gateway_port);
  for (size_t i = 0; i < rs.ports.size(); ++i)
    if (metric_or(m, "nexus_gateway_responses_ws_sessions_total", {{"replica", "127.0.0.1:" + std::to_string(rs.ports[i])}}) > 0)
      return i;
  ADD_FAILURE() << "no replica holds the connection";
  return 0;
}

}  // namespace

TEST(GatewayAgentProtocols, ResponsesAndMessagesAnswerAsAReplicaDoes) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--policy", "prefix"});
  ASSERT_GT(gw.port, 0);
  const json responses = {{"input", "Once upon a time"}, {"max_output_tokens", 8}, {"temperature", 0},
                          {"prompt_cache_key", "thread-1"}};
  const json messages = {{"model", "stories260K"}, {"max_tokens", 8}, {"temperature", 0},
                         {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}};
  HttpClient direct("127.0.0.1", rs.ports[0]);
  const HttpResponse want_r = direct.post("/v1/responses", responses.dump());
  const HttpResponse want_m = direct.post("/v1/messages", messages.dump());
  ASSERT_EQ(want_r.status, 200) << want_r.body;
  ASSERT_EQ(want_m.status, 200) << want_m.body;

  HttpClient c("127.0.0.1", gw.port);
  const HttpResponse got_r = c.post("/v1/responses", responses.dump());
  ASSERT_EQ(got_r.status, 200) << got_r.body;
  const json first = json::parse(got_r.body);
  EXPECT_EQ(first["output"][0]["content"][0]["text"], json::parse(want_r.body)["output"][0]["content"][0]["text"]);
  const HttpResponse got_m = c.post("/v1/messages", messages.dump());
  ASSERT_EQ(got_m.status, 200) << got_m.body;
  EXPECT_EQ(json::parse(got_m.body)["content"], json::parse(want_m.body)["content"]);

  // The continuation reaches the replica that stored the first response:
  // the same prompt_cache_key routes it there.
  for (int i = 0; i < 3; ++i) {
    const HttpResponse next = c.post("/v1/responses", json{{"input", "And then?"}, {"max_output_tokens", 4},
                                                           {"previous_response_id", first["id"]},
                                                           {"prompt_cache_key", "thread-1"}}.dump());
    EXPECT_EQ(next.status, 200) << next.body;
  }

}

// Issue 36's acceptance: a Codex-like connection in the Responses
// WebSocket mode (a generate:false warm-up, then turns that each continue
// the last response by previous_response_id with only their new items)
// through the gateway; its replica is killed between two requests. The next
// request succeeds, on the other replica, and its answer equals what a fresh
// connection given the same history (the items before it, the first turn's
// output, the new item) gets there (greedy).
TEST(GatewayAgentProtocols, AResponsesWebSocketWhoseReplicaIsKilledGoesOnWithItsHistory) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  const json settings = {{"max_output_tokens", 16}, {"temperature", 0}, {"store", false},
                         {"instructions", "You are a storyteller."}};
  auto with = [&](json fields) {
    for (const auto& kv : settings.items()) fields[kv.key()] = kv.value();
    return fields;
  };
  const json preamble = message("developer", "Tell short stories about animals.");
  const json first_input = message("user", "Once upon a time");
  const json second_input = message("user", "And then?");

  WsClient c("127.0.0.1", gw.port, "/v1/responses");
  const json warm = create(c, with({{"input", {preamble}}, {"generate", false}}));
  ASSERT_EQ(warm["type"], "response.completed") << warm.dump();
  const json first = create(c, with({{"input", {first_input}}, {"previous_response_id", warm["response"]["id"]}}));
  ASSERT_TRUE(answered(first)) << first.dump();
  EXPECT_GT(first["response"]["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 0);
  ASSERT_FALSE(output_text(first).empty());

  const size_t dead = ws_replica(rs, gw.port);
  ASSERT_EQ(rs.servers[dead]->proc.stop(SIGKILL), 128 + SIGKILL);
  // The client knows nothing of it: its next request continues the first turn.
  std::vector<json> events;
  const json second = create(c, with({{"input", {second_input}}, {"previous_response_id", first["response"]["id"]}}), &events);
  ASSERT_TRUE(answered(second)) << second.dump();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0]["type"], "response.created");  // nothing of the move reached the client

  // A fresh connection on the surviving replica, given the whole history.
  json history = json::array({preamble, first_input});
  for (const auto& item : first["response"]["output"]) history.push_back(item);
  history.push_back(second_input);
  WsClient fresh("127.0.0.1", rs.ports[1 - dead], "/v1/responses");
  const json want = create(fresh, with({{"input", history}}));
  ASSERT_EQ(want["type"], second["type"]) << want.dump();
  EXPECT_EQ(output_text(second), output_text(want));
  EXPECT_EQ(second["response"]["usage"]["input_tokens"], want["response"]["usage"]["input_tokens"]);
  // Without the first turn's output the answer differs: the history carried it.
  WsClient without("127.0.0.1", rs.ports[1 - dead], "/v1/responses");
  EXPECT_NE(output_text(create(without, with({{"input", {preamble, first_input, second_input}}}))), output_text(want));

  // And on: the next turn continues the new replica's response, by id.
  const json third = create(c, with({{"input", {message("user", "The end.")}}, {"previous_response_id", second["response"]["id"]}}));
  ASSERT_TRUE(answered(third)) << third.dump();
  EXPECT_GT(third["response"]["usage"]["input_tokens_details"]["cached_tokens"].get<int>(),
            second["response"]["usage"]["input_tokens"].get<int>() / 2);
  const auto m = scrape_metrics(gw.port);
  EXPECT_EQ(metric_or(m, "nexus_gateway_responses_ws_failovers_total", {{"result", "resumed"}}), 1);
  EXPECT_EQ(metric_or(m, "nexus_gateway_responses_ws_sessions", {}, -1), 1);
  c.close();
}

// After a move the gateway rewrites the client's messages, so it must read
// each whole: one over its body limit (1 MiB) cannot be passed on, and the
// session ends in the client's fault, not the replicas': an error event with
// status 400 and code message_too_large, then close 1009 (RFC 6455 7.4.1).
TEST(GatewayAgentProtocols, AnOversizedMessageAfterAMoveEndsTheSessionAs400And1009) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  WsClient c("127.0.0.1", gw.port, "/v1/responses");
  const json first = create(c, {{"input", "Once upon a time"}, {"max_output_tokens", 4}, {"store", false}});
  ASSERT_TRUE(answered(first)) << first.dump();
  const size_t dead = ws_replica(rs, gw.port);
  ASSERT_EQ(rs.servers[dead]->proc.stop(SIGKILL), 128 + SIGKILL);
  // The connection moves when the gateway reads the replica's end (nothing was running).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (metric_or(scrape_metrics(gw.port), "nexus_gateway_responses_ws_failovers_total", {{"result", "resumed"}}) < 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the connection did not move";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  c.send_json({{"type", "response.create"}, {"input", std::string((1 << 20) + 1000, 'a')}, {"store", false}});
  const json ev = c.recv_json();
  EXPECT_EQ(ev["type"], "error") << ev.dump();
  EXPECT_EQ(ev["status"], 400) << ev.dump();
  EXPECT_EQ(ev["error"]["code"], "message_too_large") << ev.dump();
  EXPECT_EQ(c.wait_closed(), 1009);
}

// Per tenant, streamed Responses and Messages answers count their tokens as
// the replica reported them (in response.incomplete and message_delta), and
// the client's stream is relayed as the replica sent it; so do the
// responses of a Responses WebSocket connection. The Messages
// client presents its key as Anthropic's clients do, in x-api-key.
TEST(GatewayAgentProtocols, StreamedResponsesAndMessagesAreCountedPerTenant) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  const std::string keys = make_temp_dir() + "/keys.txt";
  std::ofstream(keys) << "sk-r responder\nsk-m messenger\n";
  GatewayProcess gw(rs.ports, {"--api-keys", keys});
  ASSERT_GT(gw.port, 0);
  struct Case {
    const char* path;
    json body;
    Headers headers;
    const char* tenant;
    const char* last_event;
  };
  const Case cases[] = {
      {"/v1/responses",
       {{"input", "Once upon a time"}, {"max_output_tokens", 6}, {"stream", true}, {"ignore_eos", true}},
       {{"Authorization", "Bearer sk-r"}},
       "responder",
       "\"type\":\"response.incomplete\""},
      {"/v1/messages",
       {{"model", "stories260K"}, {"max_tokens", 6}, {"stream", true}, {"ignore_eos", true},
        {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}},
       {{"x-api-key", "sk-m"}},
       "messenger",
       "\"type\":\"message_stop\""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    HttpClient client("127.0.0.1", gw.port);
    client.send("POST", c.path, c.body.dump(), c.headers);
    ASSERT_EQ(client.read_header().status, 200);
    std::string last;
    while (auto ev = client.next_event()) last = *ev;
    EXPECT_NE(last.find(c.last_event), std::string::npos) << last;
  }
  // The WebSocket mode's responses count too (two of 6 tokens).
  {
    WsClient ws("127.0.0.1", gw.port, "/v1/responses", std::chrono::seconds(30), nullptr, "Bearer sk-r");
    json turn = {{"input", "Once upon a time"}, {"max_output_tokens", 6}, {"ignore_eos", true}, {"store", false}};
    const json first = create(ws, turn);
    ASSERT_EQ(first["type"], "response.incomplete") << first.dump();
    turn["previous_response_id"] = first["response"]["id"];
    turn["input"] = "And then?";
    ASSERT_EQ(create(ws, turn)["type"], "response.incomplete");
  }
  const auto m = scrape_metrics(gw.port);
  for (const auto& [t, completion] : {std::pair{"responder", 18}, std::pair{"messenger", 6}}) {
    EXPECT_EQ(metric_or(m, "nexus_gateway_tenant_tokens_total", {{"tenant", t}, {"kind", "completion"}}), completion)
        << t;
    EXPECT_GT(metric_or(m, "nexus_gateway_tenant_tokens_total", {{"tenant", t}, {"kind", "prompt"}}), 3) << t;
  }
}

// A replica that stops answering (SIGSTOP) keeps its connection open: the
// relay sees nothing fail. Its breaker opens (health checks), and the
// connection moves then: the next request is answered on the other replica
// within seconds, continuing the same history.
TEST(GatewayAgentProtocols, AResponsesWebSocketOnAFrozenReplicaMovesWhenItsBreakerOpens) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ReplicaSet rs(model, 2);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports);
  ASSERT_GT(gw.port, 0);
  const json settings = {{"max_output_tokens", 8}, {"temperature", 0}, {"store", false}};
  WsClient c("127.0.0.1", gw.port, "/v1/responses", std::chrono::seconds(20));
  json first_req = settings;
  first_req["input"] = json::array({message("user", "Once upon a time")});
  const json first = create(c, first_req);
  ASSERT_TRUE(answered(first)) << first.dump();
  const size_t frozen = ws_replica(rs, gw.port);
  ASSERT_EQ(kill(rs.servers[frozen]->proc.pid(), SIGSTOP), 0);
  const auto t0 = std::chrono::steady_clock::now();
  json next_req = settings;
  next_req["input"] = json::array({message("user", "And then?")});
  next_req["previous_response_id"] = first["response"]["id"];
  const json next = create(c, next_req);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(kill(rs.servers[frozen]->proc.pid(), SIGCONT), 0);
  std::printf("[frozen] the request on the frozen replica's connection answered in %.2f s\n", s);
  ASSERT_TRUE(answered(next)) << next.dump();
  EXPECT_LT(s, 15.0);
  const auto m = scrape_metrics(gw.port);
  EXPECT_EQ(metric_or(m, "nexus_gateway_responses_ws_failovers_total", {{"result", "resumed"}}), 1);
  EXPECT_EQ(metric_or(m, "nexus_gateway_query_of_death_total", {{"result", "detected"}}), 0);
}
