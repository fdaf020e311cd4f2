// GET /v1/realtime over a real WebSocket on loopback, in process, over the
// scripted FakeBackend (no model): event order and fields, the state
// machine's errors, bad frames, cancel/redirect, back-pressure, liveness.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "support/server_fixture.h"
#include "support/ws_client.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class RealtimeServer : public ServerFixture {
 protected:
  RealtimeServer() { manual_start_ = true; }
  void start(int32_t n_ctx = 1 << 20) {
    backend = std::make_unique<FakeBackend>(n_ctx);
    start_server();
  }
  std::unique_ptr<WsClient> ws() {
    auto c = std::make_unique<WsClient>("127.0.0.1", server->port());
    const json created = c->recv_json();
    EXPECT_EQ(created["type"], "session.created");
    return c;
  }
  static void expect_ws_error(WsClient& c, const std::string& code) {
    const json e = c.recv_json();
    EXPECT_EQ(e["type"], "error") << e;
    EXPECT_EQ(e["error"]["code"], code) << e;
    EXPECT_TRUE(e["error"]["message"].is_string() && !e["error"]["message"].get<std::string>().empty());
  }
};

TEST_F(RealtimeServer, OneTurnInOrderWithDocumentedFields) {
  start(1000);
  WsClient c("127.0.0.1", server->port());
  json j = c.recv_json();
  EXPECT_EQ(j["type"], "session.created");
  EXPECT_EQ(j["session"]["model"], "fake-model");
  EXPECT_EQ(j["session"]["n_ctx"], 1000);
  EXPECT_TRUE(j["session"]["id"].is_string());
  c.send_json({{"type", "session.update"}, {"session", {{"system", "S"}, {"max_tokens", 3}, {"priority", 5}}}});
  j = c.recv_json();
  EXPECT_EQ(j["type"], "session.updated");
  EXPECT_EQ(j["session"]["system"], "S");
  EXPECT_EQ(j["session"]["max_tokens"], 3);
  c.send_json({{"type", "input.append"}, {"message", {{"role", "user"}, {"content", "hi"}}}});
  c.send_json({{"type", "response.create"}, {"response", {{"return_tokens", true}}}});
  j = c.recv_json();
  ASSERT_EQ(j["type"], "response.created") << j;
  const std::string prompt = "System: S\nUser: hi\nAssistant:";
  EXPECT_EQ(j["response"]["prompt_tokens"], prompt.size() + 1);
  EXPECT_EQ(j["response"]["input_tokens"], prompt.size() + 1);
  EXPECT_EQ(j["response"]["prompt_token_ids"].size(), prompt.size() + 1);
  const std::string rid = j["response"]["id"];
  for (int i = 0; i < 3; ++i) {
    j = c.recv_json();
    EXPECT_EQ(j["type"], "response.delta");
    EXPECT_EQ(j["response_id"], rid);
    EXPECT_EQ(j["text"], "t" + std::to_string(i) + " ");
    EXPECT_EQ(j["token"], 2 + i);
  }
  j = c.recv_json();
  ASSERT_EQ(j["type"], "response.done") << j;
  EXPECT_EQ(j["response"]["id"], rid);
  EXPECT_EQ(j["response"]["finish_reason"], "length");
  EXPECT_EQ(j["response"]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["response"]["context_tokens"], prompt.size() + 1 + 3);
  for (const char* k : {"ttft_ms", "tokens_per_s"}) EXPECT_TRUE(j["response"][k].is_number()) << k;
  const GenerationRequest req = backend->last_request();
  EXPECT_NE(req.session, 0u);
  EXPECT_EQ(req.priority, 5);
  // Turn 2: kept tokens + only the continuation segment.
  c.send_json({{"type", "input.append"}, {"message", {{"role", "user"}, {"content", "more"}}}});
  c.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1}}}});
  j = c.recv_json();
  const size_t cont = std::string("\nUser: more\nAssistant:").size();
  EXPECT_EQ(j["response"]["input_tokens"], cont);
  EXPECT_EQ(c.recv_until("response.done")["response"]["usage"]["completion_tokens"], 1);
  EXPECT_EQ(backend->last_request().session, req.session);
  EXPECT_EQ(backend->last_request().prompt.size(), prompt.size() + 1 + 3 + cont);
  c.send_json({{"type", "session.close"}});
  EXPECT_EQ(c.wait_closed(), 1000);
  EXPECT_TRUE(FakeBackend::wait_for([&] { return !backend->ended_sessions().empty(); }));
  EXPECT_EQ(backend->ended_sessions().front(), req.session);
}

TEST_F(RealtimeServer, BadEventsGetErrorsAndTheConnectionStaysOpen) {
  start();
  backend->token_delay = std::chrono::milliseconds(2);
  auto c = ws();
  c->send_text("{oops");
  expect_ws_error(*c, "invalid_json");
  c->send_json({{"type", "warp.drive"}});
  expect_ws_error(*c, "unknown_event");
  c->send_json({{"type", "response.create"}});
  expect_ws_error(*c, "no_input");
  c->send_json({{"type", "response.cancel"}});
  expect_ws_error(*c, "no_response");
  c->send_json({{"type", "session.update"}, {"session", {{"temperature", -1}}}});
  expect_ws_error(*c, "invalid_value");
  c->send_json({{"type", "session.update"}, {"session", {{"model", "gpt-9"}}}});
  expect_ws_error(*c, "model_not_found");
  c->send_binary(std::string("\x00\x01", 2));
  expect_ws_error(*c, "binary_not_supported");
  // A response runs; a second response.create is refused, input is queued.
  c->send_json({{"type", "input.append"}, {"text", "go"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 100000}}}});
  EXPECT_EQ(c->recv_json()["type"], "response.created");
  c->send_json({{"type", "response.create"}});
  std::vector<json> skipped;
  EXPECT_EQ(c->recv_until("error", &skipped)["error"]["code"], "response_in_progress");
  c->send_json({{"type", "input.append"}, {"text", " on"}});
  c->send_json({{"type", "session.update"}, {"session", {{"system", "late"}}}});
  EXPECT_EQ(c->recv_until("error", &skipped)["error"]["code"], "invalid_state");
  c->send_json({{"type", "response.cancel"}});
  const json done = c->recv_until("response.done");
  EXPECT_EQ(done["response"]["finish_reason"], "cancelled");
  // Still serving: the queued input makes the next response.
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 2}}}});
  const json created = c->recv_until("response.created");
  EXPECT_EQ(created["response"]["input_tokens"], 3);  // " on", no BOS
  EXPECT_EQ(c->recv_until("response.done")["response"]["finish_reason"], "length");
}

// max_tokens is limited as over HTTP (1 <= n <= n_ctx), and a session.update
// that breaks the limit is refused when it is sent, not at the next
// response.create; the settings stay as they were.
TEST_F(RealtimeServer, OutOfRangeMaxTokensIsRefusedBySessionUpdate) {
  start(1000);
  auto c = ws();
  for (const int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{1001}, int64_t{1000000000}}) {
    c->send_json({{"type", "session.update"}, {"session", {{"max_tokens", bad}}}});
    const json e = c->recv_json();
    ASSERT_EQ(e["type"], "error") << bad << " " << e;
    EXPECT_EQ(e["error"]["code"], "invalid_value") << e;
    EXPECT_EQ(e["error"]["event"], "session.update") << e;
  }
  c->send_json({{"type", "session.update"}, {"session", json::object()}});
  json j = c->recv_json();
  ASSERT_EQ(j["type"], "session.updated") << j;
  EXPECT_FALSE(j["session"].contains("max_tokens")) << j;
  c->send_json({{"type", "session.update"}, {"session", {{"max_tokens", 1000}}}});
  EXPECT_EQ(c->recv_json()["session"]["max_tokens"], 1000);
  // A response's override is checked the same way, and the session goes on.
  c->send_json({{"type", "input.append"}, {"text", "hi"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 0}}}});
  const json e = c->recv_json();
  EXPECT_EQ(e["error"]["code"], "invalid_value") << e;
  EXPECT_EQ(e["error"]["event"], "response.create") << e;
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 2}}}});
  EXPECT_EQ(c->recv_until("response.done")["response"]["usage"]["completion_tokens"], 2);
}

// Every error names the client event it answers (docs/protocol.md), unknown
// types and events refused while parsing included.
TEST_F(RealtimeServer, ErrorsNameTheEventTheyAnswer) {
  start();
  auto c = ws();
  const auto expect_error = [&](const json& ev, const std::string& code) {
    c->send_json(ev);
    const json e = c->recv_json();
    ASSERT_EQ(e["type"], "error") << e;
    EXPECT_EQ(e["error"]["code"], code) << e;
    EXPECT_EQ(e["error"]["event"], ev["type"]) << e;
  };
  expect_error({{"type", "warp.drive"}}, "unknown_event");
  expect_error({{"type", "input.append"}, {"message", {{"role", "narrator"}, {"content", "x"}}}}, "invalid_value");
  expect_error({{"type", "input.append"}, {"message", {{"role", 7}, {"content", "x"}}}}, "invalid_event");
  expect_error({{"type", "input.append"}, {"text", ""}}, "invalid_value");
  expect_error({{"type", "input.append"}}, "invalid_event");
  expect_error({{"type", "response.redirect"}, {"message", {{"role", "bot"}, {"content", "x"}}}}, "invalid_value");
  expect_error({{"type", "session.update"}}, "invalid_event");
  expect_error({{"type", "response.create"}, {"response", 3}}, "invalid_event");
  // No type to name: no event field.
  c->send_json({{"kind", "x"}});
  const json e = c->recv_json();
  EXPECT_EQ(e["error"]["code"], "invalid_event") << e;
  EXPECT_FALSE(e["error"].contains("event")) << e;
  // Still open, and none of it was queued.
  c->send_json({{"type", "response.create"}});
  expect_ws_error(*c, "no_input");
}

TEST_F(RealtimeServer, OversizedMessageIsDiscardedWithAnError) {
  opts.body_limit = 4096;
  start();
  auto c = ws();
  // Over the limit, under the refused-input budget (4 x the limit).
  c->send_text(json{{"type", "input.append"}, {"text", std::string(6000, 'a')}}.dump());
  expect_ws_error(*c, "message_too_large");
  // The session goes on; the oversized input was not kept.
  c->send_json({{"type", "response.create"}});
  expect_ws_error(*c, "no_input");
  c->send_text(json{{"type", "input.append"}, {"text", std::string(4000, 'a')}}.dump());  // under the limit
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1}}}});
  EXPECT_EQ(c->recv_json()["response"]["input_tokens"], 4001);
}

// Past 4 x body_limit of refused messages the session is cut off: an error
// input_flood, then a close frame 1008, the rest of what the client sends
// discarded unread. A new session works. Here one message of 2 MiB: it is
// refused as soon as it passes the limit, and its rest counts as it comes.
TEST_F(RealtimeServer, RefusedInputPastTheBudgetClosesTheSession) {
  opts.body_limit = 4096;
  start();
  auto c = ws();
  c->send_text(json{{"type", "input.append"}, {"text", std::string(2 << 20, 'a')}}.dump());
  expect_ws_error(*c, "message_too_large");  // as soon as it passes the limit
  const json flood = c->recv_json();
  EXPECT_EQ(flood["error"]["code"], "input_flood") << flood.dump();
  EXPECT_EQ(c->recv(), std::nullopt);
  EXPECT_EQ(c->close_code(), 1008);
  // Many messages each under the limit: tests/adversarial/test_adversarial_realtime.cpp.
  auto e = ws();
  e->send_json({{"type", "input.append"}, {"text", "hi"}});
  e->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1}}}});
  EXPECT_EQ(e->recv_until("response.done")["response"]["finish_reason"], "length");
}

TEST_F(RealtimeServer, InputThatCannotFitIsDiscardedNotKeptQueued) {
  start(100);  // the fake tokenizer: one token per byte
  auto c = ws();
  c->send_json({{"type", "input.append"}, {"text", std::string(200, 'a')}});
  c->send_json({{"type", "response.create"}});
  expect_ws_error(*c, "context_length_exceeded");
  c->send_json({{"type", "response.create"}});
  expect_ws_error(*c, "no_input");  // the session is not stuck with it
  c->send_json({{"type", "input.append"}, {"text", "hi"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 2}}}});
  EXPECT_EQ(c->recv_until("response.done")["response"]["finish_reason"], "length");
}

// HttpServer::drain() (the first SIGTERM of nexus serve): an open session
// gets an error for a new response and stays open; a new connection, HTTP or
// WebSocket upgrade, gets 503; /metrics still answers.
TEST_F(RealtimeServer, DrainingRefusesNewResponsesAndConnections) {
  start();
  auto c = ws();
  auto http = connect();
  server->drain();
  c->send_json({{"type", "input.append"}, {"text", "hi"}});
  c->send_json({{"type", "response.create"}});
  expect_ws_error(*c, "server_shutting_down");
  EXPECT_EQ(http->get("/metrics").status, 200);
  const auto r = http->post("/v1/completions", R"({"prompt":"x","max_tokens":1})");
  EXPECT_EQ(expect_error(r, 503)["code"], "server_shutting_down");
  EXPECT_EQ(r.header("retry-after"), "1");
  auto late = connect();
  EXPECT_EQ(expect_error(late->get("/v1/realtime"), 503)["code"], "server_shutting_down");
  EXPECT_EQ(server->in_flight(), 0);
}

// The server stopping with a response running (the drain ran out, or a
// second stop signal): the session hears why, then a close frame 1001
// (going away), not a dropped TCP connection.
TEST_F(RealtimeServer, StopWithAResponseRunningSaysWhyAndClosesWithGoingAway) {
  start();
  backend->token_delay = std::chrono::milliseconds(2);
  auto c = ws();
  c->send_json({{"type", "session.update"}, {"session", {{"max_tokens", 100000}}}});
  ASSERT_EQ(c->recv_json()["type"], "session.updated");
  c->send_json({{"type", "input.append"}, {"text", "hi"}});
  c->send_json({{"type", "response.create"}});
  ASSERT_EQ(c->recv_json()["type"], "response.created");
  ASSERT_EQ(c->recv_json()["type"], "response.delta");
  std::thread stopper([this] { server->stop(); });
  json e;
  EXPECT_NO_THROW(e = c->recv_until("error")) << "the connection ended without an error event";
  const int close_code = c->wait_closed();
  stopper.join();
  EXPECT_EQ(e["error"]["code"], "server_shutting_down") << e;
  EXPECT_EQ(close_code, 1001);
}

TEST_F(RealtimeServer, PlainGetIsUpgradeRequired) {
  start();
  auto http = connect();
  const auto r = http->get("/v1/realtime");
  EXPECT_EQ(expect_error(r, 426)["code"], "upgrade_required");
  EXPECT_EQ(http->get("/health").status, 200);  // same connection, still HTTP
}

TEST_F(RealtimeServer, RedirectCancelsThenContinuesWithTheNewInput) {
  start();
  backend->token_delay = std::chrono::milliseconds(2);
  auto c = ws();
  c->send_json({{"type", "input.append"}, {"text", "a"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 100000}, {"return_tokens", true}}}});
  const json first = c->recv_json();
  ASSERT_EQ(first["type"], "response.created");
  EXPECT_EQ(c->recv_json()["type"], "response.delta");
  c->send_json({{"type", "response.redirect"}, {"text", "b"}, {"response", {{"max_tokens", 2}}}});
  std::vector<json> deltas;
  const json done = c->recv_until("response.done", &deltas);
  EXPECT_EQ(done["response"]["finish_reason"], "cancelled");
  const json next = c->recv_json();
  ASSERT_EQ(next["type"], "response.created");
  // Kept: BOS 'a' + every generated token (the first delta too), then 'b'.
  const int generated = done["response"]["usage"]["completion_tokens"];
  EXPECT_EQ(static_cast<int>(deltas.size()) + 1, generated);
  EXPECT_EQ(next["response"]["prompt_tokens"], 2 + generated + 1);
  EXPECT_EQ(next["response"]["input_tokens"], 1);
  EXPECT_EQ(c->recv_until("response.done")["response"]["finish_reason"], "length");
}

TEST_F(RealtimeServer, DroppedConnectionCancelsAndEndsTheSession) {
  start();
  backend->token_delay = std::chrono::milliseconds(2);
  auto c = ws();
  c->send_json({{"type", "input.append"}, {"text", "a"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 100000}}}});
  EXPECT_EQ(c->recv_json()["type"], "response.created");
  EXPECT_EQ(c->recv_json()["type"], "response.delta");
  const uint64_t session = backend->last_request().session;
  c->drop();
  EXPECT_TRUE(FakeBackend::wait_for([&] { return backend->cancelled.load() == 1; }));
  EXPECT_TRUE(FakeBackend::wait_for([&] {
    auto e = backend->ended_sessions();
    return std::find(e.begin(), e.end(), session) != e.end();
  }));
}

TEST_F(RealtimeServer, SlowReaderGetsItsResponseCancelled) {
  opts.max_pending_bytes = 16 << 10;
  start();
  backend->piece = std::string(1000, 'x');
  WsClient c("127.0.0.1", server->port());
  c.recv_json();
  c.send_json({{"type", "input.append"}, {"text", "a"}});
  c.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1000000}}}});
  // Not reading: socket buffers, then the session's queue fill up.
  EXPECT_TRUE(FakeBackend::wait_for([&] { return backend->cancelled.load() == 1; }, std::chrono::seconds(60)));
  std::vector<json> skipped;
  const json done = c.recv_until("response.done", &skipped);
  EXPECT_EQ(done["response"]["finish_reason"], "cancelled");
  EXPECT_LT(static_cast<int>(skipped.size()), done["response"]["usage"]["completion_tokens"].get<int>());
  EXPECT_EQ(c.recv_json()["error"]["code"], "slow_consumer");
}

TEST_F(RealtimeServer, ServerPingsAnIdleConnectionAndDropsADeadOne) {
  opts.ws_ping_interval = std::chrono::milliseconds(100);
  start();
  // A client that never reads never answers: dropped after two intervals.
  auto dead = ws();
  // A reading client answers the pings (Beast does while a read is pending)
  // and stays connected: after two of them it still gets its answer.
  WsClient alive("127.0.0.1", server->port(), "/v1/realtime", std::chrono::seconds(10));
  EXPECT_EQ(alive.recv_json()["type"], "session.created");
  const json update = {{"type", "session.update"}, {"session", {{"max_tokens", 3}}}};
  const auto reply = alive.recv_after_pings(2, update.dump());
  ASSERT_TRUE(reply.has_value()) << "the reading client was dropped";
  EXPECT_EQ(json::parse(*reply)["type"], "session.updated");
  EXPECT_GE(alive.pings_received(), 2);
  // Each wait is for the event, bounded by a deadline (not a fixed sleep).
  EXPECT_TRUE(dead->wait_peer_closed(std::chrono::seconds(10))) << "the silent client was not dropped";
  EXPECT_FALSE(dead->recv().has_value());
  EXPECT_GE(dead->pings_received(), 1) << "it was pinged before being dropped";
}

}  // namespace

// Queued input is bounded in bytes against the context before anything is
// tokenized: (n_ctx - kept - 1) * max_token_bytes (the fake's default 256).
// An append past it is refused with input_too_large; what was queued before
// stays and still gets its response.
TEST_F(RealtimeServer, InputBeyondTheContextInBytesIsRefusedAtAppend) {
  start(100);  // room: 99 tokens, 99 * 256 = 25344 bytes
  auto c = ws();
  c->send_json({{"type", "input.append"}, {"text", std::string(30000, 'a')}});
  expect_ws_error(*c, "input_too_large");
  c->send_json({{"type", "response.create"}});
  expect_ws_error(*c, "no_input");  // the refused input was not kept
  c->send_json({{"type", "input.append"}, {"text", "hi"}});
  c->send_json({{"type", "input.append"}, {"text", std::string(25343, 'b')}});  // 2 + 25343 > 25344
  expect_ws_error(*c, "input_too_large");
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 2}}}});
  const json created = c->recv_until("response.created");
  EXPECT_EQ(created["response"]["input_tokens"], 3);  // BOS + "hi"
  EXPECT_EQ(c->recv_until("response.done")["response"]["finish_reason"], "length");
}

// A response.create over 16 KiB of queued input is tokenized on the
// tokenizer workers; input appended meanwhile waits for the next response.
TEST_F(RealtimeServer, LargeInputIsTokenizedOffTheIoThreadAndLaterInputStaysQueued) {
  opts.io_threads = 1;
  start();
  auto c = ws();
  c->send_json({{"type", "input.append"}, {"text", "hi"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1}}}});
  c->recv_until("response.done");
  const std::thread::id io_thread = backend->tokenize_thread.load();
  c->send_json({{"type", "input.append"}, {"text", std::string(64 << 10, 'a')}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1}}}});
  c->send_json({{"type", "input.append"}, {"text", "later"}});
  const json created = c->recv_until("response.created");
  EXPECT_EQ(created["response"]["input_tokens"].get<int>(), 64 << 10) << created;
  EXPECT_NE(backend->tokenize_thread.load(), io_thread);
  c->recv_until("response.done");
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1}}}});
  const json next = c->recv_until("response.created");
  EXPECT_EQ(next["response"]["input_tokens"].get<int>(), 5) << next;  // "later", not re-sent input
}

TEST_F(RealtimeServer, LargeMessagesParsedOffTheIoThreadKeepTheirOrderAndErrors) {
  opts.io_threads = 1;
  start();
  auto c = ws();
  // Over TokenizerPool::kOffThreadBytes: parsed on the pool, reading paused
  // meanwhile. A malformed one is invalid_json; the small events sent right
  // behind each large one are answered after it, in order.
  c->send_text("{\"type\":\"input.append\",\"text\":\"" + std::string(32 << 10, 'a'));
  c->send_json({{"type", "response.cancel"}});
  json e = c->recv_json();
  EXPECT_EQ(e["error"]["code"], "invalid_json") << e;
  e = c->recv_json();
  EXPECT_EQ(e["error"]["code"], "no_response") << e;
  c->send_json({{"type", "input.append"}, {"message", {{"role", "robot"}, {"content", std::string(32 << 10, 'b')}}}});
  c->send_json({{"type", "input.append"}, {"text", "ok"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1}}}});
  e = c->recv_json();
  EXPECT_EQ(e["error"]["code"], "invalid_value") << e;  // the role, named with its event
  EXPECT_EQ(e["error"]["event"], "input.append") << e;
  const json created = c->recv_until("response.created");
  EXPECT_EQ(created["response"]["input_tokens"].get<int>(), 3) << created;  // BOS + "ok": nothing of the refused ones
}
