// The HTTP server's connection limits (issue 26, over the FakeBackend, in
// process): --max-connections refuses the excess with a 503 JSON error,
// the header and body timeouts answer 408, an idle connection is closed
// without a response, and a large body is parsed and tokenized off the I/O
// threads (TokenizerPool).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/server_fixture.h"

using namespace nexus;
using namespace nexus::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

class ServerLimits : public ServerFixture {
 protected:
  ServerLimits() { manual_start_ = true; }

  // Reads until the server closes the connection; returns all it sent.
  static std::string read_all(HttpClient& c) {
    std::string all;
    for (std::string more; !(more = c.read_raw_some()).empty();) all += more;
    return all;
  }
  // The JSON error body of a raw response, {} when there is none.
  static json error_of(const std::string& raw) {
    const size_t at = raw.find("\r\n\r\n");
    if (at == std::string::npos) return {};
    const json j = json::parse(raw.substr(at + 4), nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : json{};
  }
};

TEST_F(ServerLimits, StalledHeaderIs408) {
  opts.header_timeout = 300ms;
  start_server();
  auto c = connect();
  c->write_raw("GET /health HTTP/1.1\r\nHo");
  const std::string got = read_all(*c);
  ASSERT_TRUE(got.starts_with("HTTP/1.1 408 ")) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_EQ(error_of(got)["code"], "request_timeout") << got;
}

TEST_F(ServerLimits, StalledBodyIs408) {
  opts.body_timeout = 300ms;
  start_server();
  auto c = connect();
  c->write_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: 100\r\n\r\n{\"prompt\":");
  const std::string got = read_all(*c);
  ASSERT_TRUE(got.starts_with("HTTP/1.1 408 ")) << got;
  const json e = error_of(got);
  EXPECT_EQ(e["code"], "request_timeout") << got;
  EXPECT_NE(e["message"].get<std::string>().find("body"), std::string::npos) << got;
}

// A connection that never starts a request is closed after the idle timeout
// with nothing sent (no request, no response); the header timeout, shorter
// here, does not apply before the first byte.
TEST_F(ServerLimits, IdleConnectionIsClosedWithoutAResponse) {
  opts.idle_timeout = 300ms;
  opts.header_timeout = 50ms;
  start_server();
  auto c = connect();
  EXPECT_EQ(c->get("/health").status, 200);  // then idle on keep-alive
  EXPECT_EQ(read_all(*c), "");
  auto silent = connect();
  EXPECT_EQ(read_all(*silent), "");
}

// A slow but steady client within the timeouts is served.
TEST_F(ServerLimits, HeaderInPiecesWithinTheTimeoutIsServed) {
  opts.header_timeout = 2s;
  start_server();
  auto c = connect();
  c->write_raw("GET /health HTTP/1.1\r\n");
  std::this_thread::sleep_for(100ms);
  c->write_raw("Host: x\r\n\r\n");
  std::string got;
  while (got.find("{\"status\":\"ok\"}") == std::string::npos) {
    const std::string more = c->read_raw_some();
    ASSERT_FALSE(more.empty()) << got;
    got += more;
  }
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200 ")) << got;
}

TEST_F(ServerLimits, ConnectionsBeyondMaxConnectionsGet503AndTheSlotFreesUp) {
  opts.max_connections = 3;
  start_server();
  EXPECT_EQ(server->max_connections(), 3);
  std::vector<std::unique_ptr<HttpClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(connect());
    ASSERT_EQ(held.back()->get("/health").status, 200);  // accepted and counted
  }
  auto extra = connect();
  extra->write_raw("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string got = read_all(*extra);
  ASSERT_TRUE(got.starts_with("HTTP/1.1 503 ")) << got;
  EXPECT_EQ(error_of(got)["code"], "too_many_connections") << got;
  EXPECT_NE(got.find("Retry-After: 1"), std::string::npos) << got;
  EXPECT_EQ(server->connections_refused(), 1u);

  // A held connection goes: a new one is served again (once the server saw
  // the close; bounded retries).
  held.pop_back();
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    auto c = connect();
    c->write_raw("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string r = read_all(*c);
    status = r.starts_with("HTTP/1.1 200 ") ? 200 : 0;
    if (status == 200) {
      EXPECT_NE(r.find("\nnexus_http_connections_refused_total "), std::string::npos) << r;
      EXPECT_NE(r.find("\nnexus_http_connections_open "), std::string::npos) << r;
    } else {
      std::this_thread::sleep_for(10ms);
    }
  }
  EXPECT_EQ(status, 200);
}

// A body of TokenizerPool::kOffThreadBytes or more is parsed and tokenized on
// a tokenizer worker, a small one on the (single) I/O thread.
TEST_F(ServerLimits, LargeBodiesAreTokenizedOffTheIoThread) {
  backend = std::make_unique<FakeBackend>(1 << 20);
  opts.io_threads = 1;
  start_server();
  auto c = connect();
  ASSERT_EQ(c->post("/v1/completions", R"({"prompt":"small","max_tokens":1})").status, 200);
  const std::thread::id io_thread = backend->tokenize_thread.load();
  const std::string big = json{{"prompt", std::string(40 << 10, 'a')}, {"max_tokens", 1}}.dump();
  const HttpResponse r = c->post("/v1/completions", big);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], (40 << 10) + 1);
  EXPECT_NE(backend->tokenize_thread.load(), io_thread);
  // The connection stays usable, and a small request is back on the I/O thread.
  ASSERT_EQ(c->post("/v1/completions", R"({"prompt":"small","max_tokens":1})").status, 200);
  EXPECT_EQ(backend->tokenize_thread.load(), io_thread);
}

}  // namespace
