// GET /metrics: routing and content type over a fake backend, and the real
// engine's metrics through `nexus serve` over loopback (stories260K).
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/http_client.h"
#include "support/metrics_text.h"
#include "support/serve_process.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

constexpr const char* kTextFormat = "text/plain; version=0.0.4; charset=utf-8";

class MetricsRoute : public ServerFixture {};

}  // namespace

TEST_F(MetricsRoute, ServesTheBackendsTextWithThePrometheusContentType) {
  auto c = connect();
  const HttpResponse r = c->get("/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), kTextFormat);
  // The backend's text first, then the HTTP server's own counters.
  EXPECT_EQ(r.body.rfind(FakeBackend::kMetricsText, 0), 0u) << r.body;
  EXPECT_NE(r.body.find("\nnexus_http_connections_accepted_total 1\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\nnexus_http_accept_errors_total 0\n"), std::string::npos) << r.body;
  EXPECT_EQ(c->get("/metrics?x=1").body.rfind(FakeBackend::kMetricsText, 0), 0u);  // query ignored
}

TEST_F(MetricsRoute, OtherMethodsAre405WithAllow) {
  auto c = connect();
  const HttpResponse r = c->post("/metrics", "{}");
  expect_error(r, 405);
  EXPECT_EQ(r.header("allow"), "GET, HEAD");
  EXPECT_EQ(c->get("/v1/metrics").status, 404);  // not an OpenAI route
}

TEST(ServeMetrics, CountsTwoCompletions) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ServeProcess s(model);
  ASSERT_GT(s.port, 0) << "nexus serve did not start";
  HttpClient c("127.0.0.1", s.port);

  int completion_tokens = 0, prompt_tokens = 0;
  for (const char* prompt : {"Once upon a time", "The cat"}) {
    const HttpResponse r = c.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 6}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    completion_tokens += j["usage"]["completion_tokens"].get<int>();
    prompt_tokens += j["usage"]["prompt_tokens"].get<int>();
  }
  ASSERT_GT(completion_tokens, 2);

  const HttpResponse r = c.get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), kTextFormat);
  const auto samples = parse_metrics_text(r.body);
  EXPECT_EQ(metric_value(samples, "nexus_time_to_first_token_seconds_count"), 2) << r.body;
  EXPECT_EQ(metric_value(samples, "nexus_e2e_request_latency_seconds_count"), 2);
  EXPECT_EQ(metric_value(samples, "nexus_request_queue_seconds_count"), 2);
  EXPECT_EQ(metric_value(samples, "nexus_generation_tokens_total"), completion_tokens);
  EXPECT_EQ(metric_value(samples, "nexus_prompt_tokens_total"), prompt_tokens);
  // One gap between each two consecutive tokens of a request.
  EXPECT_EQ(metric_value(samples, "nexus_inter_token_latency_seconds_count"), completion_tokens - 2);
  const double stop = metric_value(samples, "nexus_requests_total", {{"finish_reason", "stop"}}).value_or(-1);
  const double length = metric_value(samples, "nexus_requests_total", {{"finish_reason", "length"}}).value_or(-1);
  EXPECT_EQ(stop + length, 2);
  EXPECT_EQ(metric_value(samples, "nexus_requests_total", {{"finish_reason", "error"}}), 0);
  // Engine steps: at least one per generated token after the first, plus the prefills.
  EXPECT_GE(metric_value(samples, "nexus_step_seconds_count").value_or(0), completion_tokens);
  EXPECT_EQ(metric_value(samples, "nexus_waiting_requests"), 0);
  // The engine marks the sequence finished just after the final event (which
  // the response may overtake): the gauge returns to 0 shortly.
  bool idle = false;
  for (int i = 0; i < 500 && !idle; ++i) {
    idle = metric_value(parse_metrics_text(c.get("/metrics").body), "nexus_running_sequences") == 0;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(idle) << "nexus_running_sequences stayed above 0";
  EXPECT_TRUE(metric_value(samples, "nexus_kv_blocks", {{"state", "free"}}).has_value());
  for (const char* h : {"nexus_request_queue_seconds", "nexus_time_to_first_token_seconds",
                        "nexus_inter_token_latency_seconds", "nexus_e2e_request_latency_seconds",
                        "nexus_step_seconds", "nexus_batch_tokens", "nexus_batch_sequences"})
    expect_valid_histogram(samples, h);
  c.close();
  EXPECT_EQ(s.proc.stop(SIGTERM), 0);
}
