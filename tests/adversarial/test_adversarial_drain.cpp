// The adversarial suite, drain (issue 26, finding 6): SIGTERM to an IDLE
// `nexus serve` drains as docs/server.md says, for --drain-grace at least:
// a request on a kept-alive connection gets 503 server_shutting_down (not a
// close without a response), so does a request on a new connection, and
// /metrics still answers; then the process exits 0. CTest label
// `adversarial`.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/http_client.h"
#include "support/serve_process.h"

using namespace nexus::test;
using nlohmann::json;

TEST(AdversarialDrain, IdleServerDrainsWith503AndALiveMetricsEndpoint) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  // A grace long enough for the checks below on a loaded machine; the
  // default is 1 s.
  ServeProcess server(model, {"--drain-grace", "3"});
  ASSERT_NE(server.port, 0);
  HttpClient kept("127.0.0.1", server.port);
  ASSERT_EQ(kept.get("/health").status, 200);  // kept alive, idle
  ASSERT_EQ(::kill(server.proc.pid(), SIGTERM), 0);

  // The kept-alive connection's next request: 503 once the signal was seen
  // (a request that beat it is still served; bounded retries).
  HttpResponse r;
  for (int i = 0; i < 200; ++i) {
    r = kept.get("/health");
    if (r.status != 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(json::parse(r.body, nullptr, false)["error"]["code"], "server_shutting_down") << r.body;
  EXPECT_EQ(r.header("retry-after"), "1");

  HttpClient metrics("127.0.0.1", server.port);
  const HttpResponse m = metrics.get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("nexus_http_connections_accepted_total"), std::string::npos);
  EXPECT_EQ(json::parse(metrics.get("/load").body, nullptr, false)["draining"], true);

  HttpClient fresh("127.0.0.1", server.port);
  const HttpResponse refused = fresh.post("/v1/completions", R"({"prompt":"Hi","max_tokens":1})");
  EXPECT_EQ(refused.status, 503) << refused.body;

  EXPECT_EQ(server.proc.stop(0), 0);  // exits on its own once the grace is over
}
