// `nexus bench` end to end: the binary against `nexus serve` on stories260K
// (both HTTP transports and the WebSocket session transport, the JSON report
// checked field by field, token totals against the server's /metrics),
// against an unreachable server, and against a server that answers 4xx.
#include <gtest/gtest.h>

#include <csignal>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "support/child_process.h"
#include "support/http_client.h"
#include "support/metrics_text.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

// The documented schema (docs/bench.md): exactly these keys.
const std::set<std::string> kTopKeys = {"schema", "config", "phases"};
const std::set<std::string> kConfigKeys = {
    "url",   "endpoint",   "transport", "model",     "mode",     "concurrency",    "rate",
    "requests", "duration_s", "turns", "preamble_tokens", "warm_up", "prompt_tokens", "max_tokens", "ignore_eos", "prompts_file",
    "seed",  "warmup",     "timeout_s", "price_per_hour", "sweep_concurrency", "sweep_rate"};
const std::set<std::string> kPhaseKeys = {
    "label", "mode", "concurrency", "rate", "duration_s", "sessions", "requests", "completed", "failed", "errors",
    "error_examples", "prompt_tokens", "completion_tokens", "cached_tokens", "usage_missing", "text_chunks", "connections_opened",
    "request_throughput", "output_token_throughput", "total_token_throughput", "cost_per_million_output_tokens",
    "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "ttft_by_turn", "request_details"};
const std::set<std::string> kSummaryKeys = {"count", "mean", "min", "max", "p50", "p90", "p99"};
const std::set<std::string> kRequestKeys = {
    "session", "turn", "ok", "error", "error_message", "http_status", "start_s", "start_delay_ms", "connect_ms",
    "reused_connection", "ttft_ms", "e2e_ms", "tpot_ms", "chunk_times_ms", "max_tokens", "prompt_tokens",
    "completion_tokens", "cached_tokens", "server_ttft_ms"};

std::set<std::string> keys(const json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

class BenchE2E : public ::testing::Test {
 protected:
  // The served model (a file of ../shared/models).
  virtual const char* model_file() const { return "stories260K.gguf"; }
  void SetUp() override {
    model_ = shared_model_path(model_file());
    if (!require_file(model_)) {
      if (HasFailure()) return;
      GTEST_SKIP() << "missing shared file " << model_ << " (set CI=true to fail instead)";
    }
    server_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{nexus_binary(), "serve", "-m", model_, "--port", "0", "--threads", "1"});
    const auto line = server_->read_line();
    ASSERT_TRUE(line.has_value()) << "no startup line";
    std::smatch m;
    ASSERT_TRUE(std::regex_match(*line, m, std::regex(R"(listening on (http://127\.0\.0\.1:(\d+)))"))) << *line;
    url_ = m[1];
    port_ = static_cast<uint16_t>(std::stoi(m[2]));
    dir_ = make_temp_dir();
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM), 0);
    }
  }

  // The server's counter `name` (GET /metrics), summed over its labels.
  double counter(const std::string& name) {
    HttpClient c("127.0.0.1", port_);
    const HttpResponse r = c.get("/metrics");
    EXPECT_EQ(r.status, 200);
    double v = 0;
    for (const MetricSample& s : parse_metrics_text(r.body)) v += s.name == name ? s.value : 0;
    return v;
  }

  std::string model_, url_, dir_;
  uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> server_;
};

void check_summary(const json& s, uint64_t count) {
  EXPECT_EQ(keys(s), kSummaryKeys) << s.dump();
  EXPECT_EQ(s["count"], count);
  EXPECT_LE(s["min"].get<double>(), s["p50"].get<double>());
  EXPECT_LE(s["p50"].get<double>(), s["p90"].get<double>());
  EXPECT_LE(s["p90"].get<double>(), s["p99"].get<double>());
  EXPECT_LE(s["p99"].get<double>(), s["max"].get<double>());
  EXPECT_LE(s["min"].get<double>(), s["mean"].get<double>() + 1e-9);
  EXPECT_LE(s["mean"].get<double>(), s["max"].get<double>() + 1e-9);
}

TEST_F(BenchE2E, BothTransportsReportEveryFieldAndConsistentCounts) {
  for (const std::string transport : {"http", "http-keepalive"}) {
    SCOPED_TRACE(transport);
    const std::string out = dir_ + "/" + transport + ".json";
    const CommandResult r = run_nexus("bench --url " + url_ + " --transport " + transport +
                                      " --concurrency 2 --requests 6 --max-tokens 8 --ignore-eos --prompt-tokens 12"
                                      " --no-progress --json " + shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("TTFT"), std::string::npos) << r.out;
    const json j = json::parse(read_file(out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << read_file(out);
    EXPECT_EQ(keys(j), kTopKeys);
    EXPECT_EQ(j["schema"], "nexus-bench/1");
    EXPECT_EQ(keys(j["config"]), kConfigKeys);
    EXPECT_EQ(j["config"]["transport"], transport);
    EXPECT_EQ(j["config"]["model"], "stories260K");  // picked from /v1/models
    ASSERT_EQ(j["phases"].size(), 1u);
    const json& p = j["phases"][0];
    EXPECT_EQ(keys(p), kPhaseKeys);
    EXPECT_EQ(p["failed"], 0);
    EXPECT_EQ(p["errors"], json::object());
    EXPECT_EQ(p["completed"], 6);
    EXPECT_EQ(p["requests"], 6);
    EXPECT_EQ(p["usage_missing"], 0);
    // Keep-alive: one connection per worker that got a request (a worker
    // that starts late may find all 6 taken by the other: seen once in CI).
    const int opened = p["connections_opened"].get<int>();
    if (transport == "http") EXPECT_EQ(opened, 6);
    else EXPECT_TRUE(opened == 1 || opened == 2) << opened;
    check_summary(p["ttft_ms"], 6);
    check_summary(p["e2e_ms"], 6);
    check_summary(p["tpot_ms"], 6);
    for (const char* q : {"min", "mean", "p50", "p90", "p99", "max"}) {
      EXPECT_GE(p["e2e_ms"][q].get<double>(), p["ttft_ms"][q].get<double>()) << q;
    }
    ASSERT_EQ(p["ttft_by_turn"].size(), 1u);
    EXPECT_EQ(p["ttft_by_turn"][0]["turn"], 1);

    const json& details = p["request_details"];
    ASSERT_EQ(details.size(), 6u);
    int64_t usage_sum = 0;
    uint64_t chunks = 0, reused = 0;
    for (const json& d : details) {
      EXPECT_EQ(keys(d), kRequestKeys) << d.dump();
      EXPECT_TRUE(d["ok"].get<bool>());
      EXPECT_EQ(d["http_status"], 200);
      EXPECT_EQ(d["max_tokens"], 8);
      EXPECT_EQ(d["completion_tokens"], 8);  // ignore_eos: exactly max_tokens
      EXPECT_GT(d["prompt_tokens"].get<int64_t>(), 0);
      usage_sum += d["completion_tokens"].get<int64_t>();
      const auto times = d["chunk_times_ms"].get<std::vector<double>>();
      // Each text chunk holds at least one token (a token may hold no text yet).
      ASSERT_GE(times.size(), 1u);
      EXPECT_LE(times.size(), 8u);
      chunks += times.size();
      EXPECT_DOUBLE_EQ(d["ttft_ms"].get<double>(), times.front());
      for (size_t i = 1; i < times.size(); ++i) EXPECT_LE(times[i - 1], times[i]);
      EXPECT_GE(d["e2e_ms"].get<double>(), times.back());
      EXPECT_GE(d["e2e_ms"].get<double>(), d["ttft_ms"].get<double>());
      EXPECT_NEAR(d["tpot_ms"].get<double>(), (d["e2e_ms"].get<double>() - d["ttft_ms"].get<double>()) / 7, 1e-6);
      reused += d["reused_connection"].get<bool>() ? 1 : 0;
    }
    // Keep-alive: each worker opened once and reused it after.
    EXPECT_EQ(reused, transport == "http" ? 0u : static_cast<size_t>(6 - opened));
    EXPECT_EQ(usage_sum, 6 * 8);
    EXPECT_EQ(p["completion_tokens"], 6 * 8);
    EXPECT_EQ(p["text_chunks"], chunks);
    EXPECT_EQ(p["itl_ms"]["count"], chunks - 6);  // gaps within each request
    EXPECT_GT(p["output_token_throughput"].get<double>(), 0);
    EXPECT_GT(p["request_throughput"].get<double>(), 0);
  }
}

TEST_F(BenchE2E, ChatTurnsAndSweepWriteJsonToStdoutAndAnSvg) {
  const std::string svg = dir_ + "/sweep.svg";
  const CommandResult r = run_nexus("bench --url " + url_ + " --endpoint chat --turns 2 --sweep-concurrency 1,2"
                                    " --requests 2 --max-tokens 4 --ignore-eos --prompt-tokens 6 --warmup 1"
                                    " --price-per-hour 1.5 --no-progress --json - --svg " + shell_quote(svg));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(r.out, nullptr, false);  // stdout is only the JSON
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_NE(r.err.find("TTFT by turn"), std::string::npos) << r.err;  // the table went to stderr
  ASSERT_EQ(j["phases"].size(), 2u);
  for (const json& p : j["phases"]) {
    EXPECT_EQ(p["completed"], 4);  // 2 sessions x 2 turns
    EXPECT_EQ(p["completion_tokens"], 16);
    ASSERT_EQ(p["ttft_by_turn"].size(), 2u);
    EXPECT_EQ(p["ttft_by_turn"][1]["turn"], 2);
    EXPECT_TRUE(p["cost_per_million_output_tokens"].is_number());
  }
  const std::string s = read_file(svg);
  EXPECT_EQ(s.rfind("<?xml", 0), 0u);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
}

// --transport ws: one /v1/realtime session per bench session. The same
// seed sends the same prompts as over HTTP, so the server counts the same
// prompt tokens; the report's totals equal what the server's /metrics
// counted while the bench ran.
TEST_F(BenchE2E, WebSocketTransportReportsServerUsage) {
  const std::string args = " --concurrency 2 --requests 6 --max-tokens 8 --ignore-eos --prompt-tokens 12 --no-progress";
  const CommandResult h = run_nexus("bench --url " + url_ + " --transport http-keepalive --json " +
                                    shell_quote(dir_ + "/http.json") + args);
  ASSERT_EQ(h.exit_code, 0) << h.out << h.err;
  const double prompt0 = counter("nexus_prompt_tokens_total"), gen0 = counter("nexus_generation_tokens_total"),
               cached0 = counter("nexus_cached_prompt_tokens_total");
  const std::string out = dir_ + "/ws.json";
  const CommandResult r = run_nexus("bench --url " + url_ + " --transport ws --json " + shell_quote(out) + args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("transport ws"), std::string::npos) << r.out;
  const json j = json::parse(read_file(out), nullptr, false);
  ASSERT_TRUE(j.is_object()) << read_file(out);
  EXPECT_EQ(keys(j), kTopKeys);
  EXPECT_EQ(keys(j["config"]), kConfigKeys);
  EXPECT_EQ(j["config"]["transport"], "ws");
  ASSERT_EQ(j["phases"].size(), 1u);
  const json& p = j["phases"][0];
  EXPECT_EQ(keys(p), kPhaseKeys);
  EXPECT_EQ(p["failed"], 0);
  EXPECT_EQ(p["errors"], json::object());
  EXPECT_EQ(p["completed"], 6);
  EXPECT_EQ(p["usage_missing"], 0);
  EXPECT_EQ(p["connections_opened"], 6);  // single-turn sessions: a fresh session each
  check_summary(p["ttft_ms"], 6);
  check_summary(p["e2e_ms"], 6);
  for (const char* q : {"min", "mean", "p50", "p90", "p99", "max"}) {
    EXPECT_GE(p["e2e_ms"][q].get<double>(), p["ttft_ms"][q].get<double>()) << q;
  }
  const json http_report = json::parse(read_file(dir_ + "/http.json"));
  const json& hp = http_report["phases"][0];
  int64_t prompt_sum = 0, completion_sum = 0, cached_sum = 0;
  uint64_t chunks = 0;
  ASSERT_EQ(p["request_details"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const json& d = p["request_details"][i];
    EXPECT_EQ(keys(d), kRequestKeys) << d.dump();
    EXPECT_TRUE(d["ok"].get<bool>()) << d.dump();
    EXPECT_EQ(d["http_status"], 101);
    EXPECT_FALSE(d["reused_connection"].get<bool>());
    EXPECT_GT(d["connect_ms"].get<double>(), 0);
    EXPECT_EQ(d["completion_tokens"], 8);
    // Raw text opening a session is tokenized as POST /v1/completions does.
    EXPECT_EQ(d["prompt_tokens"], hp["request_details"][i]["prompt_tokens"]) << i;
    // The HTTP run sent the same prompts: the prefix cache may serve whole blocks.
    ASSERT_TRUE(d["cached_tokens"].is_number_integer()) << d.dump();
    EXPECT_LT(d["cached_tokens"].get<int64_t>(), d["prompt_tokens"].get<int64_t>());
    cached_sum += d["cached_tokens"].get<int64_t>();
    ASSERT_TRUE(d["server_ttft_ms"].is_number()) << d.dump();
    EXPECT_GT(d["server_ttft_ms"].get<double>(), 0);
    const auto times = d["chunk_times_ms"].get<std::vector<double>>();
    ASSERT_GE(times.size(), 1u);
    EXPECT_LE(times.size(), 8u);
    for (size_t k = 1; k < times.size(); ++k) EXPECT_LE(times[k - 1], times[k]);
    EXPECT_GE(d["e2e_ms"].get<double>(), times.back());
    EXPECT_GE(d["e2e_ms"].get<double>(), d["ttft_ms"].get<double>());
    prompt_sum += d["prompt_tokens"].get<int64_t>();
    completion_sum += d["completion_tokens"].get<int64_t>();
    chunks += times.size();
  }
  EXPECT_EQ(p["prompt_tokens"], prompt_sum);
  EXPECT_EQ(p["completion_tokens"], completion_sum);
  EXPECT_EQ(completion_sum, 6 * 8);
  EXPECT_EQ(p["prompt_tokens"], hp["prompt_tokens"]);
  EXPECT_EQ(p["text_chunks"], chunks);
  EXPECT_EQ(p["itl_ms"]["count"], chunks - 6);
  EXPECT_EQ(static_cast<double>(prompt_sum), counter("nexus_prompt_tokens_total") - prompt0);
  EXPECT_EQ(static_cast<double>(completion_sum), counter("nexus_generation_tokens_total") - gen0);
  EXPECT_EQ(p["cached_tokens"], cached_sum);
  EXPECT_EQ(static_cast<double>(cached_sum), counter("nexus_cached_prompt_tokens_total") - cached0);
}

// Multi-turn over one session: each later turn sends only its new input, the
// server prefills only that (cached_tokens covers the rest) and its
// prompt_tokens count the whole conversation.
TEST_F(BenchE2E, WebSocketTurnsReuseTheSessionsKv) {
  for (const std::string endpoint : {"chat", "completions"}) {
    SCOPED_TRACE(endpoint);
    const double cached0 = counter("nexus_cached_prompt_tokens_total");
    const std::string out = dir_ + "/turns-" + endpoint + ".json";
    const CommandResult r = run_nexus("bench --url " + url_ + " --transport ws --endpoint " + endpoint +
                                      " --turns 3 --concurrency 2 --requests 2 --max-tokens 8 --ignore-eos"
                                      " --prompt-tokens 6 --no-progress --json " + shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const json j = json::parse(read_file(out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << read_file(out);
    const json& p = j["phases"][0];
    EXPECT_EQ(p["completed"], 6);  // 2 sessions x 3 turns
    EXPECT_EQ(p["failed"], 0);
    EXPECT_EQ(p["connections_opened"], 2);
    ASSERT_EQ(p["ttft_by_turn"].size(), 3u);
    const json& details = p["request_details"];
    ASSERT_EQ(details.size(), 6u);
    int64_t cached_sum = 0;
    for (size_t i = 0; i < 6; ++i) {
      const json& d = details[i];
      ASSERT_TRUE(d["ok"].get<bool>()) << d.dump();
      EXPECT_EQ(d["turn"], static_cast<int>(i % 3) + 1);
      EXPECT_EQ(d["reused_connection"].get<bool>(), i % 3 != 0);
      EXPECT_EQ(d["completion_tokens"], 8);
      const int64_t prompt = d["prompt_tokens"], cached = d["cached_tokens"];
      cached_sum += cached;
      if (i % 3 == 0) {
        EXPECT_EQ(cached, 0);
        continue;
      }
      // The previous turn's prompt and replies are in the conversation; all
      // of its prompt was evaluated and kept, so it is reused.
      const json& prev = details[i - 1];
      const int64_t held = prev["prompt_tokens"].get<int64_t>() + prev["completion_tokens"].get<int64_t>();
      EXPECT_GT(prompt, held - 1) << d.dump();
      EXPECT_GE(cached, prev["prompt_tokens"].get<int64_t>()) << d.dump();
      EXPECT_LT(cached, prompt) << d.dump();
    }
    EXPECT_GT(cached_sum, 0);
    EXPECT_EQ(p["cached_tokens"], cached_sum);
    EXPECT_EQ(static_cast<double>(cached_sum), counter("nexus_cached_prompt_tokens_total") - cached0);
    EXPECT_NE(r.out.find("cached"), std::string::npos) << r.out;
  }
}

// The agent protocols: an agent's workload (a shared preamble, then turns)
// over POST /v1/responses and /v1/messages, and over the Responses
// WebSocket mode with Codex's generate:false warm-up. Every turn reports the
// server's usage; a later turn's prompt is mostly read from the KV, and
// after the warm-up so is the first turn's preamble.
TEST_F(BenchE2E, AgentProtocolsReportTheirUsageTurnByTurn) {
  struct Case {
    const char* args;
    bool warm_up;
  };
  for (const Case c : {Case{"--endpoint responses", false}, Case{"--endpoint messages", false},
                       Case{"--endpoint responses --transport ws --warm-up", true}}) {
    SCOPED_TRACE(c.args);
    const std::string out = dir_ + "/agent.json";
    const CommandResult r = run_nexus("bench --url " + url_ + " " + c.args +
                                      " --preamble-tokens 40 --turns 3 --concurrency 1 --requests 2 --max-tokens 6"
                                      " --ignore-eos --prompt-tokens 6 --seed 7 --no-progress --json " + shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const json j = json::parse(read_file(out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << read_file(out);
    EXPECT_EQ(j["config"]["preamble_tokens"], 40);
    EXPECT_EQ(j["config"]["warm_up"], c.warm_up);
    const json& p = j["phases"][0];
    EXPECT_EQ(p["completed"], 6);
    EXPECT_EQ(p["failed"], 0);
    ASSERT_EQ(p["ttft_by_turn"].size(), 3u);
    for (const json& d : p["request_details"]) {
      ASSERT_TRUE(d["ok"].get<bool>()) << d.dump();
      EXPECT_EQ(d["completion_tokens"], 6) << d.dump();
      const int64_t prompt = d["prompt_tokens"], cached = d["cached_tokens"];
      EXPECT_GT(prompt, 40) << d.dump();  // the preamble's words and more
      if (d["turn"] != 1 || c.warm_up || d["session"] != 0) EXPECT_GT(cached, prompt / 2) << d.dump();
    }
    EXPECT_GT(p["ttft_by_turn"][2]["cached_tokens_mean"].get<double>(), 0);
    EXPECT_NE(r.out.find("preamble 40 words"), std::string::npos) << r.out;
  }
}

TEST_F(BenchE2E, WebSocketErrorEventsAreServerErrors) {
  const std::string out = dir_ + "/ws-errors.json";
  const CommandResult r = run_nexus("bench --url " + url_ + " --transport ws --model gpt-4 --requests 3"
                                    " --max-tokens 4 --no-progress --json " + shell_quote(out));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  const json p = json::parse(read_file(out))["phases"][0];
  EXPECT_EQ(p["failed"], 3);
  EXPECT_EQ(p["errors"], json({{"server_error", 3}}));
  EXPECT_NE(p["error_examples"]["server_error"].get<std::string>().find("model_not_found"), std::string::npos)
      << p["error_examples"].dump();
}

TEST_F(BenchE2E, ServerAnswering4xxCountsErrors) {
  const std::string out = dir_ + "/errors.json";
  // An unknown model: the server answers 400 to every request.
  const CommandResult r = run_nexus("bench --url " + url_ + " --model gpt-4 --concurrency 2 --requests 5"
                                    " --max-tokens 4 --no-progress --json " + shell_quote(out));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("http_400 x5"), std::string::npos) << r.out;
  const json j = json::parse(read_file(out));
  const json& p = j["phases"][0];
  EXPECT_EQ(p["completed"], 0);
  EXPECT_EQ(p["failed"], 5);
  EXPECT_EQ(p["errors"], json({{"http_400", 5}}));
  EXPECT_NE(p["error_examples"]["http_400"].get<std::string>().find("gpt-4"), std::string::npos);
  EXPECT_EQ(p["ttft_ms"]["count"], 0);
  for (const json& d : p["request_details"]) {
    EXPECT_FALSE(d["ok"].get<bool>());
    EXPECT_EQ(d["error"], "http_400");
    EXPECT_EQ(d["http_status"], 400);
  }
}

// TinyLLama-v0 has a 128-token context: the default synthetic prompt must
// fit in it, so `nexus bench` with no length flags works against it.
class BenchE2ESmallContext : public BenchE2E {
 protected:
  const char* model_file() const override { return "TinyLLama-v0.Q8_0.gguf"; }
};

TEST_F(BenchE2ESmallContext, DefaultPromptFitsA128TokenContext) {
  const std::string out = dir_ + "/defaults.json";
  const CommandResult r =
      run_nexus("bench --url " + url_ + " --requests 3 --no-progress --json " + shell_quote(out));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(read_file(out));
  EXPECT_EQ(j["config"]["prompt_tokens"], "32");
  const json& p = j["phases"][0];
  EXPECT_EQ(p["completed"], 3);
  EXPECT_EQ(p["failed"], 0);
  for (const json& d : p["request_details"]) {
    EXPECT_LT(d["prompt_tokens"].get<int64_t>(), 64) << d.dump();  // leaves room for a completion
    EXPECT_GT(d["completion_tokens"].get<int64_t>(), 0) << d.dump();
  }
}

TEST(BenchCli, UnreachableServerIsAClearErrorWithoutHanging) {
  const CommandResult r = run_nexus("bench --url http://127.0.0.1:1 --requests 3 --no-progress --timeout 20");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("server not reachable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// Usage errors, all exit 2 and name the flag, before any request is sent.
TEST(BenchCli, BadFlagsAreRejected) {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c : {Case{"bench --prompt-tokens uniform:9:3", "--prompt-tokens: length spec 'uniform:9:3'"},
                        Case{"bench --url ftp://x", "--url: ftp://x: expected http://"},
                        Case{"bench --rate 0", "--rate: 0 is not a number above 0"},
                        Case{"bench --rate 2 --concurrency 3", "excludes"},
                        Case{"bench --transport carrier-pigeon", "--transport: carrier-pigeon not in"},
                        Case{"bench --max-tokens normal:x:1", "--max-tokens: length spec 'normal:x:1'"},
                        Case{"bench --sweep-concurrency 1,0", "--sweep-concurrency: 0 is outside 1 to 100000"},
                        Case{"bench --sweep-rate 1,-2", "--sweep-rate: -2 is not a number above 0"},
                        Case{"bench --extra-body [1]", "--extra-body: '[1]' is not a JSON object"},
                        Case{"bench --warmup -1", "--warmup: -1 is outside 0 to"},
                        Case{"bench --endpoint messages --transport ws", "the Messages API has no WebSocket mode"},
                        Case{"bench --endpoint responses --warm-up --preamble-tokens 9", "--warm-up needs --endpoint responses --transport ws"},
                        Case{"bench --endpoint responses --transport ws --warm-up", "--warm-up needs --preamble-tokens"},
                        Case{"bench --preamble-tokens 9", "--preamble-tokens needs a message API"}}) {
    const CommandResult r = run_nexus(std::string(c.args) + " --no-progress");
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
  }
}

}  // namespace
