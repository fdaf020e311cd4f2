// The web chat's files at / (assets built into the binary) and the live
// stats stream GET /v1/stats/stream, over a fake backend and over the real
// engine (stories260K from ../shared/models).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/engine_server.h"
#include "support/http_client.h"
#include "support/server_fixture.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class WebUi : public ServerFixture {};

std::string source_file(const std::string& rel) {
  std::ifstream f(std::string(NEXUS_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The `data:` payloads of the next `n` events of an open stream (skipping
// events without data, such as the `retry:` line).
std::vector<json> read_snapshots(HttpClient& c, size_t n) {
  std::vector<json> out;
  while (out.size() < n) {
    const std::optional<std::string> ev = c.next_event();
    if (!ev) break;
    if (ev->rfind("data: ", 0) != 0) continue;
    out.push_back(json::parse(ev->substr(6)));
  }
  return out;
}

void expect_quantiles(const json& q) {
  ASSERT_TRUE(q.is_object()) << q;
  EXPECT_TRUE(q["count"].is_number_unsigned()) << q;
  for (const char* k : {"p50", "p90", "p99"}) EXPECT_TRUE(q[k].is_null() || q[k].is_number()) << k << " " << q;
}

void expect_snapshot_fields(const json& s) {
  EXPECT_TRUE(s["t"].is_number_integer()) << s;
  for (const char* k : {"window_s", "interval_s", "tokens_per_s", "steps_per_s", "step_ms", "batch_size",
                        "batch_tokens"})
    EXPECT_TRUE(s[k].is_number()) << k << " " << s;
  for (const char* k : {"running", "waiting", "kv_used_blocks", "kv_cached_blocks", "kv_total_blocks"})
    EXPECT_TRUE(s[k].is_number_integer()) << k << " " << s;
  expect_quantiles(s["ttft_ms"]);
  expect_quantiles(s["itl_ms"]);
}

}  // namespace

TEST_F(WebUi, RootServesTheEmbeddedPageWithItsAssets) {
  auto c = connect();
  const HttpResponse page = c->get("/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(page.body, source_file("assets/web/index.html"));  // the file, byte for byte
  EXPECT_NE(page.header("content-security-policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(page.header("cache-control"), "no-cache");
  struct Asset {
    const char* path;
    const char* file;
    const char* type;
  };
  const Asset assets[] = {{"/ui/style.css", "assets/web/style.css", "text/css; charset=utf-8"},
                          {"/ui/chart.js", "assets/web/chart.js", "text/javascript; charset=utf-8"},
                          {"/ui/auth.js", "assets/web/auth.js", "text/javascript; charset=utf-8"},
                          {"/ui/chat.js", "assets/web/chat.js", "text/javascript; charset=utf-8"},
                          {"/ui/dashboard.js", "assets/web/dashboard.js", "text/javascript; charset=utf-8"},
                          {"/ui/sdk/index.js", "assets/web/sdk/index.js", "text/javascript; charset=utf-8"}};
  // Offline by construction: no absolute URL anywhere (no CDN, no font host).
  const std::regex external("(https?:)?//[a-zA-Z0-9.-]+\\.[a-z]{2,}/");
  EXPECT_FALSE(std::regex_search(page.body, external));
  for (const Asset& a : assets) {
    SCOPED_TRACE(a.path);
    EXPECT_NE(page.body.find(std::string("\"") + a.path + "\""), std::string::npos) << "the page links it";
    const HttpResponse r = c->get(a.path);  // same connection: kept alive
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("content-type"), a.type);
    EXPECT_FALSE(r.body.empty());
    EXPECT_EQ(r.body, source_file(a.file));
    EXPECT_FALSE(std::regex_search(r.body, external));
  }
}

TEST_F(WebUi, DashboardPathHeadAndErrors) {
  auto c = connect();
  EXPECT_EQ(c->get("/dashboard").body, source_file("assets/web/index.html"));
  EXPECT_EQ(c->get("/index.html?x=1").status, 200);
  const HttpResponse head = c->request("HEAD", "/ui/chat.js");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), std::to_string(source_file("assets/web/chat.js").size()));
  EXPECT_TRUE(head.body.empty());
  const HttpResponse post = c->post("/", "{}");
  expect_error(post, 405);
  EXPECT_EQ(post.header("allow"), "GET, HEAD");
  expect_error(c->get("/ui/missing.js"), 404);
  expect_error(c->post("/v1/stats/stream", "{}"), 405);
}

TEST_F(WebUi, StatsStreamPushesSnapshotsWithTheDocumentedFields) {
  server::LiveCounters live;
  live.running = 3;
  live.waiting = 1;
  live.kv_used_blocks = 5;
  live.kv_cached_blocks = 2;
  live.kv_total_blocks = 100;
  backend->set_live_counters(live);
  HttpClient c("127.0.0.1", server->port());
  c.send("GET", "/v1/stats/stream");
  const HttpResponse h = c.read_header();
  ASSERT_EQ(h.status, 200);
  EXPECT_EQ(h.header("content-type"), "text/event-stream");
  EXPECT_EQ(h.header("cache-control"), "no-cache");
  // The latest snapshot at once, then one a second: the third is newer than
  // the first and shows the backend's gauges (sampled after they were set).
  const std::vector<json> s = read_snapshots(c, 3);
  ASSERT_EQ(s.size(), 3u);
  for (const json& j : s) expect_snapshot_fields(j);
  EXPECT_GT(s[2]["t"].get<int64_t>(), s[0]["t"].get<int64_t>());
  EXPECT_EQ(s[2]["running"], 3);
  EXPECT_EQ(s[2]["waiting"], 1);
  EXPECT_EQ(s[2]["kv_used_blocks"], 5);
  EXPECT_EQ(s[2]["kv_cached_blocks"], 2);
  EXPECT_EQ(s[2]["kv_total_blocks"], 100);
  EXPECT_TRUE(s[2]["ttft_ms"]["p50"].is_null());  // no request: no percentile
  EXPECT_EQ(s[2]["ttft_ms"]["count"], 0);
}

TEST_F(WebUi, StopEndsAnOpenStatsStream) {
  HttpClient c("127.0.0.1", server->port());
  c.send("GET", "/stats/stream");  // the alias without /v1
  ASSERT_EQ(c.read_header().status, 200);
  ASSERT_EQ(read_snapshots(c, 1).size(), 1u);
  server->stop();
  EXPECT_TRUE(c.wait_closed_by_peer());
}

TEST_F(WebUi, ManyStreamsComeAndGo) {
  // Clients that leave at once, mid-stream: the hub forgets them (the server
  // still stops cleanly in TearDown) and a later stream still gets data.
  for (int i = 0; i < 20; ++i) {
    HttpClient c("127.0.0.1", server->port());
    c.send("GET", "/v1/stats/stream");
    ASSERT_EQ(c.read_header().status, 200);
  }
  HttpClient c("127.0.0.1", server->port());
  c.send("GET", "/v1/stats/stream");
  ASSERT_EQ(c.read_header().status, 200);
  EXPECT_EQ(read_snapshots(c, 2).size(), 2u);
}

namespace {

class WebUiEngine : public EngineServer {
 protected:
  void SetUp() override { start("stories260K.gguf", EngineOptions{.n_threads = 1}); }
};

}  // namespace

TEST_F(WebUiEngine, StatsStreamReflectsTheEnginesTraffic) {
  const json r = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_TRUE(r.is_object());
  HttpClient c("127.0.0.1", server_->port());
  c.send("GET", "/v1/stats/stream");
  ASSERT_EQ(c.read_header().status, 200);
  // Within a few snapshots the finished request is in the minute's window.
  json seen;
  for (int i = 0; i < 5; ++i) {
    const std::vector<json> s = read_snapshots(c, 1);
    ASSERT_EQ(s.size(), 1u);
    expect_snapshot_fields(s[0]);
    if (s[0]["ttft_ms"]["count"].get<uint64_t>() >= 1) {
      seen = s[0];
      break;
    }
  }
  ASSERT_FALSE(seen.is_null()) << "no snapshot counted the request";
  EXPECT_GT(seen["ttft_ms"]["p50"].get<double>(), 0.0) << seen;
  EXPECT_GE(seen["itl_ms"]["count"].get<uint64_t>(), 1u) << seen;  // 8 tokens: 7 gaps (unless EOS came first)
  EXPECT_GT(seen["kv_total_blocks"].get<int>(), 0) << seen;
  EXPECT_EQ(seen["running"], 0) << seen;
}
