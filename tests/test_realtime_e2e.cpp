// GET /v1/realtime end to end: a real `nexus serve` on stories260K and real
// WebSocket clients over loopback. Greedy continuations are checked against
// POST /v1/completions given the same conversation as token ids.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/http_client.h"
#include "support/metrics_text.h"
#include "support/serve_process.h"
#include "support/test_support.h"
#include "support/ws_client.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

class RealtimeE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = shared_model_path("stories260K.gguf");
    if (!require_file(path)) {
      if (HasFailure()) return;
      GTEST_SKIP() << "missing shared file " << path << " (set CI=true to fail instead)";
    }
    serve_ = std::make_unique<ServeProcess>(path);
    ASSERT_NE(serve_->port, 0) << "nexus serve did not start";
  }
  uint16_t port() const { return serve_->port; }

  std::unique_ptr<WsClient> session(const json& settings = json::object()) {
    auto c = std::make_unique<WsClient>("127.0.0.1", port());
    EXPECT_EQ(c->recv_json()["type"], "session.created");
    json s = {{"temperature", 0}, {"return_tokens", true}};
    s.update(settings);
    c->send_json({{"type", "session.update"}, {"session", s}});
    EXPECT_EQ(c->recv_json()["type"], "session.updated");
    return c;
  }

  // A greedy completion over HTTP of the token-id prompt.
  std::string http_greedy(const json& prompt_ids, int max_tokens) {
    HttpClient http("127.0.0.1", port());
    const auto r = http.post("/v1/completions", json{{"prompt", prompt_ids}, {"max_tokens", max_tokens},
                                                     {"temperature", 0}, {"ignore_eos", true}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["choices"][0]["text"];
  }

  double metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    HttpClient http("127.0.0.1", port());
    const auto v = metric_value(parse_metrics_text(http.get("/metrics").body), name, labels);
    EXPECT_TRUE(v.has_value()) << name;
    return v.value_or(-1);
  }
  // Waits (bounded) until no sequence runs and no session keeps KV blocks.
  bool engine_idle() {
    for (int i = 0; i < 200; ++i) {
      if (metric("nexus_running_sequences") == 0 && metric("nexus_kv_blocks", {{"state", "used"}}) == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }

  std::unique_ptr<ServeProcess> serve_;
};

struct Response {
  json created, done;
  std::string text;
  std::vector<int> tokens;
};

Response read_response(WsClient& c) {
  Response r;
  r.created = c.recv_json();
  EXPECT_EQ(r.created["type"], "response.created") << r.created;
  const std::string id = r.created["response"]["id"];
  for (;;) {
    json j = c.recv_json();
    if (j["type"] == "response.done") {
      r.done = std::move(j);
      EXPECT_EQ(r.done["response"]["id"], id);
      return r;
    }
    EXPECT_EQ(j["type"], "response.delta") << j;
    EXPECT_EQ(j["response_id"], id);
    r.text += j["text"].get<std::string>();
    if (j.contains("token")) r.tokens.push_back(j["token"]);
  }
}

TEST_F(RealtimeE2E, TwoParallelSessionsMatchStatelessGreedy) {
  auto a = session();
  auto b = session();
  a->send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
  b->send_json({{"type", "input.append"}, {"message", {{"role", "user"}, {"content", "Tell me about a cat."}}}});
  a->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 24}, {"ignore_eos", true}}}});
  b->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 24}, {"ignore_eos", true}}}});
  const Response ra = read_response(*a);
  const Response rb = read_response(*b);
  for (const Response* r : {&ra, &rb}) {
    EXPECT_EQ(r->done["response"]["finish_reason"], "length");
    EXPECT_EQ(r->done["response"]["usage"]["completion_tokens"], 24);
    EXPECT_EQ(r->tokens.size(), 24u);
    EXPECT_GT(r->done["response"]["ttft_ms"].get<double>(), 0);
    EXPECT_EQ(r->text, http_greedy(r->created["response"]["prompt_token_ids"], 24));
  }
  EXPECT_NE(ra.text, rb.text);
}

// Predicted Outputs per response: the text is the one without it; usage
// counts the prediction; a prediction in the session settings is refused.
TEST_F(RealtimeE2E, PredictionPerResponseLeavesTheTextAsIs) {
  auto a = session();
  auto b = session();
  for (WsClient* c : {a.get(), b.get()}) c->send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
  a->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 24}, {"ignore_eos", true}}}});
  const Response ra = read_response(*a);
  EXPECT_FALSE(ra.done["response"]["usage"].contains("accepted_prediction_tokens"));
  b->send_json({{"type", "response.create"},
                {"response", {{"max_tokens", 24}, {"ignore_eos", true},
                              {"prediction", {{"type", "content"}, {"content", ra.text}}}}}});
  const Response rb = read_response(*b);
  EXPECT_EQ(rb.text, ra.text);
  EXPECT_EQ(rb.tokens, ra.tokens);
  EXPECT_GT(rb.done["response"]["usage"]["accepted_prediction_tokens"].get<int>(), 0) << rb.done;
  EXPECT_TRUE(rb.done["response"]["usage"].contains("rejected_prediction_tokens"));
  a->send_json({{"type", "session.update"}, {"session", {{"prediction", {{"type", "content"}, {"content", "x"}}}}}});
  EXPECT_EQ(a->recv_json()["error"]["code"], "invalid_event");
}

TEST_F(RealtimeE2E, CancelMidStream) {
  auto c = session({{"max_tokens", 1500}, {"ignore_eos", true}});
  c->send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
  c->send_json({{"type", "response.create"}});
  EXPECT_EQ(c->recv_json()["type"], "response.created");
  c->send_json({{"type", "response.cancel"}});
  const json done = c->recv_until("response.done");
  EXPECT_EQ(done["response"]["finish_reason"], "cancelled");
  EXPECT_LT(done["response"]["usage"]["completion_tokens"].get<int>(), 1500);
  c->send_json({{"type", "response.cancel"}});
  EXPECT_EQ(c->recv_json()["error"]["code"], "no_response");
}

TEST_F(RealtimeE2E, RedirectPrefillsOnlyTheNewInput) {
  auto c = session({{"ignore_eos", true}});
  c->send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
  c->send_json({{"type", "response.create"}, {"response", {{"max_tokens", 1500}}}});
  const json created = c->recv_json();
  ASSERT_EQ(created["type"], "response.created");
  std::vector<int> kept = created["response"]["prompt_token_ids"];
  const json first = c->recv_json();
  ASSERT_EQ(first["type"], "response.delta");
  kept.push_back(first["token"]);
  c->send_json({{"type", "response.redirect"}, {"text", " The dog"}, {"response", {{"max_tokens", 24}}}});
  // The interrupted response: every delta until its done.
  std::vector<json> deltas;
  const json done1 = c->recv_until("response.done", &deltas);
  EXPECT_EQ(done1["response"]["finish_reason"], "cancelled");
  const Response r2 = read_response(*c);
  const std::vector<int> prompt2 = r2.created["response"]["prompt_token_ids"];
  const int context1 = done1["response"]["context_tokens"];
  ASSERT_GT(static_cast<int>(prompt2.size()), context1);
  for (const json& d : deltas) kept.push_back(d["token"]);
  ASSERT_EQ(static_cast<int>(kept.size()), context1);
  EXPECT_TRUE(std::equal(kept.begin(), kept.end(), prompt2.begin())) << "the conversation is append-only";
  // Only the new input (and the interrupted response's last sampled token,
  // never evaluated) was prefilled.
  EXPECT_GE(r2.done["response"]["usage"]["cached_tokens"].get<int>(), context1 - 1);
  EXPECT_EQ(r2.done["response"]["finish_reason"], "length");
  EXPECT_EQ(r2.text, http_greedy(prompt2, 24));
}

TEST_F(RealtimeE2E, SecondTurnReusesTheFirst) {
  auto c = session({{"max_tokens", 16}, {"ignore_eos", true}});
  c->send_json({{"type", "input.append"}, {"message", {{"role", "user"}, {"content", "Hi there."}}}});
  c->send_json({{"type", "response.create"}});
  const Response r1 = read_response(*c);
  const int context1 = r1.done["response"]["context_tokens"];
  EXPECT_EQ(context1, r1.created["response"]["prompt_tokens"].get<int>() + 16);
  c->send_json({{"type", "input.append"}, {"message", {{"role", "user"}, {"content", "And then?"}}}});
  c->send_json({{"type", "response.create"}});
  const Response r2 = read_response(*c);
  EXPECT_GE(r2.done["response"]["usage"]["cached_tokens"].get<int>(), context1 - 1);
  EXPECT_LT(r2.created["response"]["input_tokens"].get<int>(), r2.created["response"]["prompt_tokens"].get<int>());
  EXPECT_EQ(r2.text, http_greedy(r2.created["response"]["prompt_token_ids"], 16));
  c->send_json({{"type", "session.close"}});
  EXPECT_EQ(c->wait_closed(), 1000);
  EXPECT_TRUE(engine_idle());
}

TEST_F(RealtimeE2E, BadInputAndDroppedConnectionsLeakNothing) {
  auto bad = session();
  bad->send_text("{");
  EXPECT_EQ(bad->recv_json()["error"]["code"], "invalid_json");
  bad->send_binary("\x01\x02");
  EXPECT_EQ(bad->recv_json()["error"]["code"], "binary_not_supported");
  bad->send_text(json{{"type", "input.append"}, {"text", std::string(2 << 20, 'a')}}.dump());
  EXPECT_EQ(bad->recv_json()["error"]["code"], "message_too_large");
  bad->send_json({{"type", "response.create"}});
  EXPECT_EQ(bad->recv_json()["error"]["code"], "no_input");
  for (int i = 0; i < 3; ++i) {
    auto c = session({{"max_tokens", 1500}, {"ignore_eos", true}});
    c->send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
    c->send_json({{"type", "response.create"}});
    EXPECT_EQ(c->recv_json()["type"], "response.created");
    EXPECT_EQ(c->recv_json()["type"], "response.delta");
    c->drop();  // mid-response
  }
  EXPECT_TRUE(engine_idle());
  auto ok = session({{"max_tokens", 4}});
  ok->send_json({{"type", "input.append"}, {"text", "Once"}});
  ok->send_json({{"type", "response.create"}});
  EXPECT_EQ(read_response(*ok).done["response"]["usage"]["completion_tokens"], 4);
}

long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST_F(RealtimeE2E, ThousandIdleConnections) {
  constexpr int kConnections = 1000;
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < kConnections + 200) {
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, kConnections + 500);
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  ASSERT_GE(lim.rlim_cur, static_cast<rlim_t>(kConnections + 100)) << "raise the file-descriptor limit";
  auto ioc = std::make_shared<boost::asio::io_context>();
  std::vector<std::unique_ptr<WsClient>> clients;
  auto open = [&](int n) {
    for (int i = 0; i < n; ++i) {
      clients.push_back(std::make_unique<WsClient>("127.0.0.1", port(), "/v1/realtime", std::chrono::seconds(30), ioc));
      ASSERT_EQ(clients.back()->recv_json()["type"], "session.created");
    }
  };
  open(50);  // warm-up: first-use allocations are not per connection
  const long before = rss_kib(serve_->proc.pid());
  open(kConnections);
  const long after = rss_kib(serve_->proc.pid());
  const double per_conn_kib = static_cast<double>(after - before) / kConnections;
  std::printf("RSS %ld KiB -> %ld KiB with %d more idle connections: %.1f KiB per connection\n", before, after,
              kConnections, per_conn_kib);
  if (const char* out = std::getenv("NEXUS_REALTIME_MEMORY_OUT")) {
    std::ofstream(out) << json{{"connections", kConnections}, {"rss_before_kib", before}, {"rss_after_kib", after},
                               {"per_connection_kib", per_conn_kib}}.dump() << "\n";
  }
  EXPECT_LT(per_conn_kib, 256.0);
  // Still serving, over HTTP and over a new session.
  HttpClient http("127.0.0.1", port());
  EXPECT_EQ(http.get("/health").status, 200);
  auto c = session({{"max_tokens", 2}});
  c->send_json({{"type", "input.append"}, {"text", "Once"}});
  c->send_json({{"type", "response.create"}});
  EXPECT_EQ(read_response(*c).done["response"]["finish_reason"], "length");
  clients.clear();
}

}  // namespace
