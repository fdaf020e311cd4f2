// nexus bench HTTP transport and runner against the in-process server over
// the scripted FakeBackend (no model): connection modes, token arrival
// times, usage, error kinds, closed and open loop, multi-turn sessions.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "loadgen/bench.h"
#include "loadgen/http_transport.h"
#include "loadgen/metrics.h"
#include "loadgen/runner.h"
#include "support/server_fixture.h"
#include "util/error.h"

using namespace nexus;
using namespace nexus::loadgen;
using namespace nexus::test;

namespace {

class BenchHttp : public ServerFixture {
 protected:
  // The fake's tokens are bytes: a context that fits multi-turn histories.
  BenchHttp() { backend = std::make_unique<FakeBackend>(4096, 64); }

  HttpTransportOptions http(bool keep_alive) const {
    HttpTransportOptions o;
    o.server = parse_server_url("http://127.0.0.1:" + std::to_string(server->port()));
    o.keep_alive = keep_alive;
    o.timeout = std::chrono::seconds(30);
    return o;
  }
  static RequestSpec completion(const std::string& prompt, int32_t max_tokens) {
    RequestSpec r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    return r;
  }
};

void expect_streamed(const RequestResult& r, int32_t tokens) {
  ASSERT_TRUE(r.ok()) << r.error_key() << ": " << r.error_message;
  EXPECT_EQ(r.http_status, 200);
  // The fake sends one chunk per token ("t0 ", "t1 ", ...).
  ASSERT_EQ(r.token_times.size(), static_cast<size_t>(tokens));
  EXPECT_EQ(r.completion_tokens, tokens);
  EXPECT_TRUE(r.prompt_tokens.has_value());
  EXPECT_EQ(r.text.rfind("t0 t1 ", 0), 0u) << r.text;
  EXPECT_LE(r.start, r.token_times.front());
  for (size_t i = 1; i < r.token_times.size(); ++i) EXPECT_LE(r.token_times[i - 1], r.token_times[i]);
  EXPECT_LE(r.token_times.back(), r.end);
}

TEST_F(BenchHttp, KeepAliveReusesOneConnection) {
  HttpTransport t(http(true));
  for (int i = 0; i < 3; ++i) {
    const RequestResult r = t.run_request(completion("hello", 5));
    expect_streamed(r, 5);
    EXPECT_EQ(r.reused_connection, i > 0);
  }
  EXPECT_EQ(t.connections_opened(), 1u);
  EXPECT_EQ(server->connections_accepted(), 1u);
}

TEST_F(BenchHttp, ConnectionPerRequestOpensOneEach) {
  HttpTransport t(http(false));
  for (int i = 0; i < 3; ++i) {
    const RequestResult r = t.run_request(completion("hello", 4));
    expect_streamed(r, 4);
    EXPECT_FALSE(r.reused_connection);
  }
  EXPECT_EQ(t.connections_opened(), 3u);
  EXPECT_TRUE(FakeBackend::wait_for([&] { return server->connections_accepted() == 3u; }));
}

TEST_F(BenchHttp, ChatEndpointStreamsDeltas) {
  HttpTransport t(http(true));
  RequestSpec r;
  r.api = Api::Chat;
  r.messages = nlohmann::json::array({{{"role", "user"}, {"content", "Hi"}}});
  r.max_tokens = 3;
  r.ignore_eos = true;
  // The role preamble (empty content) is not a token arrival.
  expect_streamed(t.run_request(r), 3);
  EXPECT_EQ(backend->last_request().stop.max_tokens, 3);
}

TEST_F(BenchHttp, ClientErrorsAreHttpStatusWithTheServerMessage) {
  HttpTransport t(http(true));
  RequestSpec r = completion("hello", 4);
  r.model = "no-such-model";
  const RequestResult res = t.run_request(r);
  EXPECT_EQ(res.error, ErrorKind::HttpStatus);
  EXPECT_EQ(res.http_status, 400);
  EXPECT_EQ(res.error_key(), "http_400");
  EXPECT_NE(res.error_message.find("no-such-model"), std::string::npos) << res.error_message;
  EXPECT_TRUE(res.token_times.empty());
  // The connection stays usable after an error response.
  expect_streamed(t.run_request(completion("hello", 2)), 2);
  EXPECT_EQ(t.connections_opened(), 1u);
}

TEST_F(BenchHttp, ErrorInsideTheStreamIsAServerError) {
  HttpTransport t(http(true));
  const RequestResult r = t.run_request(completion("please FAIL", 4));
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.error, ErrorKind::Server);
  EXPECT_NE(r.error_message.find("scripted failure"), std::string::npos) << r.error_message;
}

TEST_F(BenchHttp, SlowServerTimesOut) {
  backend->hold();  // the generation never starts
  HttpTransportOptions o = http(true);
  o.timeout = std::chrono::milliseconds(300);
  HttpTransport t(o);
  const RequestResult r = t.run_request(completion("hello", 4));
  EXPECT_EQ(r.error, ErrorKind::Timeout);
  EXPECT_EQ(r.error_key(), "timeout");
  backend->release();
}

TEST(BenchHttpNoServer, RefusedConnectionIsAConnectError) {
  // A port that was just free: bind, read the port, close.
  uint16_t port = 0;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  HttpTransportOptions o;
  o.server = parse_server_url("http://127.0.0.1:" + std::to_string(port));
  o.timeout = std::chrono::seconds(10);
  HttpTransport t(o);
  RequestSpec r;
  r.prompt = "x";
  const RequestResult res = t.run_request(r);
  EXPECT_EQ(res.error, ErrorKind::Connect);
  EXPECT_NE(res.error_message.find("refused"), std::string::npos) << res.error_message;
  EXPECT_EQ(t.connections_opened(), 0u);

  BenchOptions b;
  b.http = o;
  b.load.sessions = 2;
  try {
    run_bench(b);
    ADD_FAILURE() << "no error for an unreachable server";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not reachable"), std::string::npos) << e.what();
  }
}

TEST_F(BenchHttp, ClosedLoopRunsEverySessionWithOneConnectionPerWorker) {
  WorkloadOptions w;
  w.prompt_tokens = LengthDistribution::fixed(3);
  w.max_tokens = LengthDistribution::parse("uniform:2:6");
  w.turns = 2;
  w.api = Api::Chat;
  const Workload workload(w);
  LoadOptions l;
  l.concurrency = 3;
  l.sessions = 7;
  int callbacks = 0;
  const PhaseRun run = run_phase(workload, http_transport_factory(http(true)), l,
                                 [&](const RequestRecord&) { ++callbacks; });
  EXPECT_EQ(run.sessions, 7u);
  ASSERT_EQ(run.records.size(), 14u);
  EXPECT_EQ(callbacks, 14);
  EXPECT_LE(run.connections_opened, 3u);
  EXPECT_EQ(run.connections_opened, server->connections_accepted());
  const PhaseReport p = analyze_phase(run, "c3", 3, 0, std::nullopt);
  EXPECT_EQ(p.completed, 14u);
  EXPECT_EQ(p.failed, 0u);
  ASSERT_EQ(p.ttft_by_turn.size(), 2u);
  int64_t wanted = 0;
  for (const RequestMetrics& m : p.requests_detail) {
    EXPECT_EQ(m.completion_tokens, m.max_tokens);
    EXPECT_EQ(m.chunk_times_ms.size(), static_cast<size_t>(m.max_tokens));
    wanted += m.max_tokens;
  }
  EXPECT_EQ(p.completion_tokens, wanted);
  EXPECT_EQ(p.text_chunks, static_cast<uint64_t>(wanted));
  // Turn 2 resent turn 1's exchange (user, assistant, user): a longer prompt.
  for (size_t i = 0; i + 1 < p.requests_detail.size(); i += 2) {
    const RequestMetrics &t1 = p.requests_detail[i], &t2 = p.requests_detail[i + 1];
    ASSERT_EQ(t1.session, t2.session);
    ASSERT_EQ(t2.turn, 1);
    EXPECT_GT(*t2.prompt_tokens, *t1.prompt_tokens + 2 * t1.max_tokens);
  }
}

TEST_F(BenchHttp, FailedTurnEndsItsSession) {
  WorkloadOptions w;
  w.turns = 3;
  w.max_tokens = LengthDistribution::fixed(4);
  w.prompts = parse_prompts_jsonl("{\"prompt\": \"FAIL now\"}\n", "inline");
  const Workload workload(w);
  LoadOptions l;
  l.concurrency = 1;
  l.sessions = 2;
  const PhaseRun run = run_phase(workload, http_transport_factory(http(true)), l);
  ASSERT_EQ(run.records.size(), 2u);  // turn 1 of each session only
  for (const RequestRecord& r : run.records) EXPECT_EQ(r.result.error, ErrorKind::Server);
}

TEST_F(BenchHttp, OpenLoopStartsTheRequestedSessions) {
  WorkloadOptions w;
  w.prompt_tokens = LengthDistribution::fixed(2);
  w.max_tokens = LengthDistribution::fixed(2);
  const Workload workload(w);
  LoadOptions l;
  l.rate = 200;
  l.sessions = 10;
  l.seed = 3;
  const PhaseRun run = run_phase(workload, http_transport_factory(http(false)), l);
  EXPECT_EQ(run.sessions, 10u);
  ASSERT_EQ(run.records.size(), 10u);
  EXPECT_GE(run.workers, 1);
  EXPECT_EQ(run.connections_opened, 10u);  // one per request in this mode
  for (const RequestRecord& r : run.records) EXPECT_TRUE(r.result.ok()) << r.result.error_message;
}

TEST_F(BenchHttp, RunBenchPicksTheModelAndSweeps) {
  BenchOptions b;
  b.http = http(true);
  b.workload.prompt_tokens = LengthDistribution::fixed(2);
  b.workload.max_tokens = LengthDistribution::fixed(3);
  b.load.sessions = 4;
  b.warmup = 2;
  b.sweep_concurrency = {1, 2};
  b.price_per_hour = 1.0;
  const BenchReport r = run_bench(b);
  EXPECT_EQ(r.config.model, "fake-model");  // from /v1/models
  ASSERT_EQ(r.phases.size(), 2u);
  EXPECT_EQ(r.phases[0].concurrency, 1);
  EXPECT_EQ(r.phases[1].concurrency, 2);
  for (const PhaseReport& p : r.phases) {
    EXPECT_EQ(p.completed, 4u);
    EXPECT_EQ(p.completion_tokens, 12);
    EXPECT_TRUE(p.cost_per_million_output_tokens.has_value());
  }
  EXPECT_EQ(backend->last_request().stop.max_tokens, 3);
  b.sweep_rate = {1.0};
  EXPECT_THROW(run_bench(b), Error);  // both sweeps
}

}  // namespace
