// The agent protocols through `nexus gateway` to real `nexus serve`
// replicas on loopback: POST /v1/responses (a continuation by
// previous_response_id under the prefix policy, where the agent's
// prompt_cache_key keeps it on the replica that stored the first response)
// and POST /v1/messages answer as a replica does directly (greedy); the
// Responses WebSocket mode, not relayed yet, gets 426 so a client falls back
// to HTTP at once.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;

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

  // The WebSocket mode: 426 at once, in OpenAI's error shape.
  HttpClient u("127.0.0.1", gw.port);
  const HttpResponse up = u.request("GET", "/v1/responses", "",
                                    {{"Upgrade", "websocket"}, {"Connection", "Upgrade"},
                                     {"Sec-WebSocket-Version", "13"}, {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}});
  EXPECT_EQ(up.status, 426) << up.body;
  EXPECT_EQ(json::parse(up.body, nullptr, false)["error"]["code"], "websocket_mode_not_relayed") << up.body;
}
