// Connection lifecycle: clients that leave mid-generation, slow clients,
// idle timeouts, pipelining, 100-continue, concurrency and shutdown.
#include <gtest/gtest.h>

#include <thread>

#include "support/server_fixture.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

class ServerLifecycle : public ServerFixture {
 protected:
  ServerLifecycle() { manual_start_ = true; }
};

const char* kLong = R"({"prompt":"x","max_tokens":60})";  // fake n_ctx 64

}  // namespace

TEST_F(ServerLifecycle, StreamingClientDisconnectStopsGeneration) {
  backend->token_delay = 20ms;  // 60 tokens: 1.2 s if never cancelled
  start_server();
  {
    auto c = connect();
    c->send("POST", "/v1/completions", R"({"prompt":"x","max_tokens":60,"stream":true})");
    ASSERT_EQ(c->read_header().status, 200);
    ASSERT_TRUE(c->next_event().has_value());  // generation is under way
    c->close();
  }
  ASSERT_TRUE(FakeBackend::wait_for([&] { return backend->cancelled == 1; }));
  EXPECT_EQ(backend->completed, 0);
  auto c2 = connect();
  EXPECT_EQ(c2->post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
}

TEST_F(ServerLifecycle, NonStreamingClientDisconnectStopsGeneration) {
  backend->token_delay = 20ms;
  start_server();
  {
    auto c = connect();
    c->send("POST", "/v1/completions", kLong);
    ASSERT_TRUE(FakeBackend::wait_for([&] { return backend->started == 1; }));
    c->close();  // the pending read on the server side sees EOF
  }
  ASSERT_TRUE(FakeBackend::wait_for([&] { return backend->cancelled == 1; }));
  EXPECT_EQ(backend->completed, 0);
  auto c2 = connect();
  EXPECT_EQ(c2->post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
}

TEST_F(ServerLifecycle, SlowClientIsCutOffNotWaitedFor) {
  // 64 KiB per token, a client that never reads: the server's queue passes
  // max_pending_bytes once the socket buffers are full, and it cancels.
  backend = std::make_unique<FakeBackend>(/*n_ctx=*/1 << 20);
  backend->piece = std::string(64 * 1024, 'z');
  opts.max_pending_bytes = 256 * 1024;
  start_server();
  auto c = connect();
  c->send("POST", "/v1/completions", R"({"prompt":"x","max_tokens":100000,"stream":true})");
  ASSERT_TRUE(FakeBackend::wait_for([&] { return backend->cancelled == 1; }));
  EXPECT_EQ(backend->completed, 0);
  auto c2 = connect();
  EXPECT_EQ(c2->get("/health").status, 200);
}

TEST_F(ServerLifecycle, IdleKeepAliveConnectionIsClosed) {
  opts.idle_timeout = 200ms;
  start_server();
  auto c = connect();
  EXPECT_EQ(c->get("/health").status, 200);
  EXPECT_TRUE(c->wait_closed_by_peer());  // bounded by the client's 30 s timeout
  auto silent = connect();                // never sends a byte
  EXPECT_TRUE(silent->wait_closed_by_peer());
}

TEST_F(ServerLifecycle, IdleTimeoutAlsoAppliesAfterAGeneration) {
  opts.idle_timeout = 200ms;
  start_server();
  auto c = connect();
  EXPECT_EQ(c->post("/v1/completions", R"({"prompt":"x","max_tokens":2})").status, 200);
  EXPECT_TRUE(c->wait_closed_by_peer());
}

TEST_F(ServerLifecycle, PipelinedRequestsAreAnsweredInOrder) {
  backend->token_delay = 1ms;
  start_server();
  auto c = connect();
  const std::string body = R"({"prompt":"x","max_tokens":3})";
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  c->write_raw(req + req + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string all;
  while (all.find("{\"status\":\"ok\"}") == std::string::npos) {
    const std::string more = c->read_raw_some();
    ASSERT_FALSE(more.empty()) << all;
    all += more;
  }
  size_t first = all.find("HTTP/1.1 200");
  size_t second = all.find("HTTP/1.1 200", first + 1);
  size_t third = all.find("HTTP/1.1 200", second + 1);
  ASSERT_NE(third, std::string::npos) << all;
  EXPECT_NE(all.find("t0 t1 t2 ", first), std::string::npos);
  // The fake counts a generation after its final event has been delivered.
  EXPECT_TRUE(FakeBackend::wait_for([&] { return backend->completed == 2; }));
  EXPECT_EQ(backend->cancelled, 0);
}

TEST_F(ServerLifecycle, ExpectContinueIsHonoured) {
  start_server();
  auto c = connect();
  const std::string body = R"({"prompt":"x","max_tokens":1})";
  c->write_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(c->read_raw_some(), "HTTP/1.1 100 Continue\r\n\r\n");
  c->write_raw(body);
  std::string reply;
  while (reply.find("t0 ") == std::string::npos) {
    const std::string more = c->read_raw_some();
    ASSERT_FALSE(more.empty()) << reply;
    reply += more;
  }
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
}

TEST_F(ServerLifecycle, ConcurrentClients) {
  start_server();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      HttpClient c("127.0.0.1", server->port());
      for (int i = 0; i < 10; ++i) {
        const bool stream = (t + i) % 2 == 0;
        const HttpResponse r = c.post("/v1/completions", stream ? R"({"prompt":"x","max_tokens":4,"stream":true})"
                                                                : R"({"prompt":"x","max_tokens":4})");
        if (r.status == 200 && r.body.find("t3 ") != std::string::npos) ok++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, 60);
  EXPECT_EQ(server->connections_accepted(), 6u);
}

TEST_F(ServerLifecycle, StopCancelsRunningGenerations) {
  backend->token_delay = 20ms;
  start_server();
  auto c = connect();
  c->send("POST", "/v1/completions", R"({"prompt":"x","max_tokens":60,"stream":true})");
  ASSERT_EQ(c->read_header().status, 200);
  ASSERT_TRUE(c->next_event().has_value());
  server->stop();
  ASSERT_TRUE(FakeBackend::wait_for([&] { return backend->cancelled == 1; }));
  EXPECT_TRUE(c->wait_closed_by_peer());
}
