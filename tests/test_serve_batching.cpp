// The batching engine seen from outside: a real `nexus serve` on loopback,
// real HTTP clients, and its Prometheus metrics. Prefix reuse, cancellation
// by a client that goes away, and a 200-request random load on a small KV
// pool where every request is accounted for.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/http_client.h"
#include "support/metrics_text.h"
#include "support/serve_process.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

std::vector<MetricSample> scrape(HttpClient& c) {
  const HttpResponse r = c.get("/metrics");
  EXPECT_EQ(r.status, 200);
  return parse_metrics_text(r.body);
}

double value(const std::vector<MetricSample>& s, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  return metric_value(s, name, labels).value_or(-1);
}

// Token ids 3..511 of the stories260K vocabulary (0-2 are special).
std::vector<int> random_ids(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> id(3, 511);
  std::vector<int> v(static_cast<size_t>(n));
  for (int& x : v) x = id(rng);
  return v;
}

TEST(ServeBatching, SharedPrefixIsReusedAndOnlyTheRestPrefilled) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ServeProcess s(model);
  ASSERT_GT(s.port, 0) << "nexus serve did not start";
  HttpClient c("127.0.0.1", s.port);
  std::mt19937 rng(1);
  const std::vector<int> prefix = random_ids(rng, 200);
  std::vector<int> second = prefix;
  for (int id : random_ids(rng, 20)) second.push_back(id);

  auto complete = [&](const std::vector<int>& prompt) {
    const HttpResponse r = c.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 5}, {"temperature", 0},
                                                          {"ignore_eos", true}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["usage"];
  };
  complete(prefix);
  const auto before = scrape(c);
  const json usage = complete(second);
  const auto after = scrape(c);

  const int cached = usage["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GE(cached, 192) << usage;
  EXPECT_EQ(value(after, "nexus_cached_prompt_tokens_total") - value(before, "nexus_cached_prompt_tokens_total"),
            cached);
  EXPECT_GE(value(after, "nexus_prefix_cache_hit_tokens_total") - value(before, "nexus_prefix_cache_hit_tokens_total"),
            192);
  // Tokens evaluated for the second request: the uncached prompt tokens plus
  // every generated token but the last.
  EXPECT_EQ(value(after, "nexus_batch_tokens_sum") - value(before, "nexus_batch_tokens_sum"),
            (220 - cached) + (5 - 1));
  c.close();
  EXPECT_EQ(s.proc.stop(SIGTERM), 0);
}

// The client reads a few events, then closes the socket. On a fast machine
// a slow client (descheduled under ctest -j) can see its 1500 tokens finish
// before it closes; such a try did not test a mid-stream disconnect, so it
// is repeated. Each try must leave the pool as it found it either way.
TEST(ServeBatching, ClientThatDisconnectsMidStreamFreesItsBlocks) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ServeProcess s(model);
  ASSERT_GT(s.port, 0) << "nexus serve did not start";
  HttpClient probe("127.0.0.1", s.port);
  const double used_before = value(scrape(probe), "nexus_kv_blocks", {{"state", "used"}});
  const std::map<std::string, std::string> cancelled = {{"finish_reason", "cancelled"}};
  const std::map<std::string, std::string> length = {{"finish_reason", "length"}};
  bool disconnected_mid_stream = false;
  for (int attempt = 0; attempt < 5 && !disconnected_mid_stream; ++attempt) {
    double running_mid = -1, used_mid = -1;
    {
      HttpClient c("127.0.0.1", s.port);
      c.send("POST", "/v1/completions",
             json{{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}}.dump());
      ASSERT_EQ(c.read_header().status, 200);
      ASSERT_TRUE(c.next_event().has_value());
      // The gauges are published after each engine step, so the step that
      // sent the first token may not have published yet when the client
      // reads it (an engine thread descheduled under ctest -j): poll briefly.
      for (int i = 0; i < 50 && running_mid != 1; ++i) {
        const auto mid = scrape(probe);
        running_mid = value(mid, "nexus_running_sequences");
        used_mid = value(mid, "nexus_kv_blocks", {{"state", "used"}});
      }
      for (int i = 0; i < 39; ++i) ASSERT_TRUE(c.next_event().has_value());
      c.close();
    }
    // The server sees the disconnect on its I/O thread; the engine finishes
    // the sequence at its next step. Wait (up to 5 s) for both the gauge and
    // the finished-request counter: under ASan and ctest -j a scrape can
    // land between the two.
    std::vector<MetricSample> m;
    double n_cancelled = 0, n_length = 0;
    for (int i = 0; i < 500; ++i) {
      m = scrape(probe);
      n_cancelled = value(m, "nexus_requests_total", cancelled);
      n_length = value(m, "nexus_requests_total", length);
      if (value(m, "nexus_running_sequences") == 0 && n_cancelled + n_length == attempt + 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(value(m, "nexus_running_sequences"), 0);
    EXPECT_EQ(value(m, "nexus_kv_blocks", {{"state", "used"}}), used_before);
    ASSERT_EQ(n_cancelled + n_length, attempt + 1)
        << "every try ends as cancelled or, if it outran the client, length (running mid-stream: " << running_mid
        << ")";
    disconnected_mid_stream = n_cancelled == 1;
    if (disconnected_mid_stream) {
      // It was cancelled, so it was running all through the polls above.
      EXPECT_EQ(running_mid, 1);
      EXPECT_GT(used_mid, used_before) << "the stream holds blocks";
    }
  }
  EXPECT_TRUE(disconnected_mid_stream) << "five tries all finished before their client closed";
  probe.close();
  EXPECT_EQ(s.proc.stop(SIGTERM), 0);
}

// 200 requests from 10 clients against a server with 4 sequence slots, a
// queue of 6 and a KV pool of 24 blocks (384 positions): some complete, some
// are cancelled by their client, some are too long (400), some are malformed
// (400), some find the queue full (429 with Retry-After). Every one of them
// ends in exactly one of those ways, the pool never changes size, and the
// server is idle and healthy afterwards.
TEST(ServeBatching, RandomLoadLosesNothingAndStaysInsideThePool) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const int kBlockBytes = 2 * 5 * 16 * 32 * 2;  // stories260K: 5 layers, KV width 32, F16
  ServeProcess s(model, {"--max-seqs", "4", "--max-queue", "6", "--kv-memory", std::to_string(24 * kBlockBytes),
                         "--max-batch-tokens", "32"});
  ASSERT_GT(s.port, 0) << "nexus serve did not start";
  HttpClient probe("127.0.0.1", s.port);
  ASSERT_EQ(value(scrape(probe), "nexus_kv_blocks_total"), 24);

  std::atomic<int> next{0}, ok{0}, cancelled{0}, too_long{0}, malformed{0}, busy{0}, other{0};
  std::atomic<bool> done{false};
  std::mutex fail_mu;
  std::string first_failure;
  auto worker = [&](int w) {
    std::mt19937 rng(100 + w);
    HttpClient* c = nullptr;
    std::unique_ptr<HttpClient> owned;
    for (int i = next++; i < 200; i = next++) {
      if (!owned) owned = std::make_unique<HttpClient>("127.0.0.1", s.port);
      c = owned.get();
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      std::vector<int> prompt = random_ids(rng, kind == 0 ? 400 : std::uniform_int_distribution<int>(1, 120)(rng));
      json body{{"prompt", prompt}, {"max_tokens", std::uniform_int_distribution<int>(1, 48)(rng)},
                {"ignore_eos", true}, {"priority", kind % 3 == 0 ? "batch" : "interactive"}};
      if (kind == 1) {  // malformed
        const HttpResponse r = c->post("/v1/completions", "{\"prompt\": [1, 2,");
        (r.status == 400 ? malformed : other)++;
        continue;
      }
      if (kind == 2) {  // streamed, then abandoned after a few events
        body["stream"] = true;
        body["max_tokens"] = 200;
        c->send("POST", "/v1/completions", body.dump());
        const HttpResponse h = c->read_header();
        if (h.status == 429) {
          c->finish();
          busy++;
          continue;
        }
        if (h.status != 200) {
          other++;
          continue;
        }
        for (int e = 0; e < 3; ++e) c->next_event();
        owned.reset();  // disconnect
        cancelled++;
        continue;
      }
      const HttpResponse r = c->post("/v1/completions", body.dump());
      if (r.status == 200) ok++;
      else if (r.status == 400 && kind == 0) too_long++;
      else if (r.status == 429 && r.header("retry-after") != "") {
        busy++;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // back off, as Retry-After asks
      }
      else {
        other++;
        std::lock_guard lock(fail_mu);
        if (first_failure.empty()) first_failure = std::to_string(r.status) + " " + r.body;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < 10; ++w) threads.emplace_back(worker, w);
  // Watch the pool while the load runs.
  int max_used = 0, scrapes = 0;
  std::thread watcher([&] {
    HttpClient c("127.0.0.1", s.port);
    while (!done) {
      const auto m = scrape(c);
      const double used = value(m, "nexus_kv_blocks", {{"state", "used"}});
      const double free = value(m, "nexus_kv_blocks", {{"state", "free"}});
      const double cached = value(m, "nexus_kv_blocks", {{"state", "cached"}});
      EXPECT_EQ(used + free + cached, 24);
      EXPECT_EQ(value(m, "nexus_kv_blocks_total"), 24);
      max_used = std::max(max_used, static_cast<int>(used));
      ++scrapes;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  watcher.join();

  EXPECT_EQ(ok + cancelled + too_long + malformed + busy, 200) << "other outcomes: " << other << " " << first_failure;
  std::printf("outcomes: %d ok, %d cancelled by the client, %d too long, %d malformed, %d busy (429); max used %d\n",
              ok.load(), cancelled.load(), too_long.load(), malformed.load(), busy.load(), max_used);
  EXPECT_GT(ok, 40);
  EXPECT_GT(too_long, 0);
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(scrapes, 0);
  EXPECT_LE(max_used, 24);
  // Idle afterwards, and still answering.
  std::vector<MetricSample> m;
  for (int i = 0; i < 500; ++i) {
    m = scrape(probe);
    if (value(m, "nexus_running_sequences") == 0 && value(m, "nexus_waiting_requests") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(value(m, "nexus_running_sequences"), 0);
  EXPECT_EQ(value(m, "nexus_waiting_requests"), 0);
  EXPECT_EQ(value(m, "nexus_kv_blocks", {{"state", "used"}}), 0);
  const double finished = value(m, "nexus_requests_total", {{"finish_reason", "stop"}}) +
                          value(m, "nexus_requests_total", {{"finish_reason", "length"}});
  EXPECT_EQ(finished, ok) << "every 200 response is one finished request";
  EXPECT_EQ(value(m, "nexus_requests_total", {{"finish_reason", "cancelled"}}), cancelled);
  EXPECT_EQ(probe.post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}}.dump()).status, 200);
  probe.close();
  EXPECT_EQ(s.proc.stop(SIGTERM), 0);
}

}  // namespace
