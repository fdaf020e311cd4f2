// `nexus serve` end to end with a real model (stories260K): the in-process
// server over the real Engine, and the binary as a separate process.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "server/backend.h"
#include "server/http_server.h"
#include "support/child_process.h"
#include "support/fake_backend.h"
#include "support/http_client.h"
#include "support/metrics_text.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

constexpr const char* kModel = "stories260K.gguf";

// Forwards to the real backend and records how each generation ended.
class ObservedBackend final : public server::Backend {
 public:
  explicit ObservedBackend(server::Backend& inner) : inner_(inner) {}
  const std::string& model_id() const override { return inner_.model_id(); }
  int32_t n_ctx() const override { return inner_.n_ctx(); }
  int32_t n_vocab() const override { return inner_.n_vocab(); }
  const server::ChatTemplate& chat_template() const override { return inner_.chat_template(); }
  std::vector<int32_t> tokenize(std::string_view t, bool s) const override { return inner_.tokenize(t, s); }
  std::string metrics_text() const override { return inner_.metrics_text(); }
  std::shared_ptr<RequestHandle> submit(GenerationRequest req, EventCallback cb) override {
    return inner_.submit(std::move(req), [this, cb = std::move(cb)](const GenerationEvent& ev) {
      if (ev.done) {
        last_completion_tokens = ev.usage.completion_tokens;
        (ev.finish == FinishReason::Cancelled ? cancelled : finished)++;
      }
      cb(ev);
    });
  }
  std::atomic<int> finished{0}, cancelled{0}, last_completion_tokens{0};

 private:
  server::Backend& inner_;
};

class ServerE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = shared_model_path(kModel);
    if (!require_file(path_)) {
      if (HasFailure()) return;
      GTEST_SKIP() << "missing shared file " << path_ << " (set CI=true to fail instead)";
    }
    gguf_ = std::make_unique<GgufFile>(path_);
    tok_ = Tokenizer::from_gguf(*gguf_);
    model_ = std::make_unique<LlamaModel>(*gguf_);
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 2048;
    engine_ = std::make_unique<Engine>(*model_, *tok_, eo);
    inner_ = std::make_unique<server::EngineBackend>(*engine_, "stories260K", server::ChatTemplate());
    backend_ = std::make_unique<ObservedBackend>(*inner_);
    server::HttpServerOptions o;
    o.port = 0;
    server_ = std::make_unique<server::HttpServer>(*backend_, o);
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  std::unique_ptr<HttpClient> connect() { return std::make_unique<HttpClient>("127.0.0.1", server_->port()); }

  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::EngineBackend> inner_;
  std::unique_ptr<ObservedBackend> backend_;
  std::unique_ptr<server::HttpServer> server_;  // last: stopped and destroyed first
};

// Text of a streamed response, checking the SSE framing on the way.
std::string streamed_text(const HttpResponse& r, bool chat) {
  EXPECT_EQ(r.status, 200) << r.body;
  const auto events = split_sse(r.body);
  EXPECT_TRUE(events.has_value()) << r.body;
  if (!events) return {};
  EXPECT_EQ(events->back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events->size(); ++i) {
    const json j = json::parse((*events)[i]);
    const json& c = j["choices"][0];
    text += chat ? c["delta"].value("content", "") : c["text"].get<std::string>();
  }
  return text;
}

}  // namespace

TEST_F(ServerE2E, GreedyCompletionMatchesTheReference) {
  std::ifstream f(shared_model_path("reference/stories260K__Once_upon_a_time.json"));
  ASSERT_TRUE(f.good());
  const json ref = json::parse(f);
  auto c = connect();
  const HttpResponse r = c->post("/v1/completions", json{{"prompt", ref["prompt"]},
                                                         {"max_tokens", ref["greedy_ids"].size()},
                                                         {"temperature", 0}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  // The reference "text" stops at the first line break; the ids go on.
  const std::string text = j["choices"][0]["text"];
  EXPECT_EQ(text.rfind(ref["text"].get<std::string>(), 0), 0u) << text;
  EXPECT_EQ(j["usage"]["completion_tokens"], ref["greedy_ids"].size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], ref["prompt_ids"].size());
  EXPECT_EQ(j["model"], "stories260K");
}

TEST_F(ServerE2E, StreamedEqualsNonStreamedAtTemperatureZero) {
  auto c = connect();
  for (const bool chat : {false, true}) {
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    json body = {{"max_tokens", 40}, {"temperature", 0}};
    if (chat) body["messages"] = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});
    else body["prompt"] = "Lily and Tom went to the park";
    const json plain = json::parse(c->post(path, body.dump()).body);
    const std::string expected = chat ? plain["choices"][0]["message"]["content"].get<std::string>()
                                      : plain["choices"][0]["text"].get<std::string>();
    EXPECT_FALSE(expected.empty());
    body["stream"] = true;
    EXPECT_EQ(streamed_text(c->post(path, body.dump()), chat), expected) << path;
  }
  EXPECT_EQ(server_->connections_accepted(), 1u);
}

TEST_F(ServerE2E, HundredStreamedRequestsOverOneConnection) {
  auto c = connect();
  for (int i = 0; i < 100; ++i) {
    const HttpResponse r = c->post("/v1/chat/completions",
        R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0,"stream":true})");
    ASSERT_FALSE(streamed_text(r, true).empty()) << "request " << i;
  }
  EXPECT_EQ(server_->connections_accepted(), 1u);
  EXPECT_EQ(backend_->finished, 100);
}

TEST_F(ServerE2E, ClientDisconnectCancelsTheGeneration) {
  {
    auto c = connect();
    c->send("POST", "/v1/completions",
            R"({"prompt":"Once upon a time","max_tokens":2000,"ignore_eos":true,"stream":true})");
    ASSERT_EQ(c->read_header().status, 200);
    ASSERT_TRUE(c->next_event().has_value());
    c->close();
  }
  ASSERT_TRUE(FakeBackend::wait_for([&] { return backend_->cancelled == 1; }, std::chrono::seconds(60)));
  EXPECT_LT(backend_->last_completion_tokens, 2000);
  auto c2 = connect();
  EXPECT_EQ(c2->post("/v1/completions", R"({"prompt":"Once","max_tokens":2})").status, 200);
}

TEST_F(ServerE2E, RealContextLimits) {
  auto c = connect();
  std::string words;
  for (int i = 0; i < 2100; ++i) words += " park";
  const HttpResponse r = c->post("/v1/completions", json{{"prompt", words}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "context_length_exceeded");
  const HttpResponse m = c->post("/v1/completions", R"({"prompt":"Once","max_tokens":2049})");
  EXPECT_EQ(m.status, 400);
  EXPECT_EQ(json::parse(m.body)["error"]["param"], "max_tokens");
  // A huge max_tokens is refused, not clamped silently, naming the limit.
  const HttpResponse huge = c->post("/v1/completions", R"({"prompt":"Once","max_tokens":1000000000})");
  EXPECT_EQ(huge.status, 400);
  const json he = json::parse(huge.body)["error"];
  EXPECT_EQ(he["code"], "invalid_value");
  EXPECT_NE(he["message"].get<std::string>().find("context length of 2048 tokens"), std::string::npos) << he;
  // max_tokens = n_ctx is allowed and capped where the context ends; usage
  // counts what was generated (docs/server.md).
  const HttpResponse full = c->post("/v1/completions",
                                    R"({"prompt":"Once upon a time","max_tokens":2048,"ignore_eos":true})");
  ASSERT_EQ(full.status, 200) << full.body;
  const json fj = json::parse(full.body);
  EXPECT_EQ(fj["choices"][0]["finish_reason"], "length");
  const int64_t prompt_tokens = fj["usage"]["prompt_tokens"];
  EXPECT_GT(prompt_tokens, 1);
  EXPECT_EQ(fj["usage"]["completion_tokens"], 2048 - prompt_tokens);
  EXPECT_EQ(fj["usage"]["total_tokens"], 2048);
  const std::string id = json::parse(c->get("/v1/models").body)["data"][0]["id"];
  EXPECT_EQ(c->post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 1}, {"model", id}}.dump()).status, 200);
  EXPECT_EQ(c->post("/v1/completions", R"({"prompt":"Once","max_tokens":1,"model":"gpt-4"})").status, 400);
}

namespace {

// The port of `nexus serve` from its startup line; 0 (and a failure) when
// the line is missing or malformed.
uint16_t listening_port(ChildProcess& p) {
  const auto line = p.read_line();
  if (!line) {
    ADD_FAILURE() << "no startup line";
    return 0;
  }
  std::smatch m;
  if (!std::regex_match(*line, m, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))"))) {
    ADD_FAILURE() << *line;
    return 0;
  }
  return static_cast<uint16_t>(std::stoi(m[1]));
}

}  // namespace

TEST(ServerProcess, ServeBinaryListensAnswersAndStopsOnSigterm) {
  NEXUS_REQUIRE_SHARED(model, kModel);
  ChildProcess p({nexus_binary(), "serve", "-m", model, "--port", "0", "--threads", "1"});
  const uint16_t port = listening_port(p);
  ASSERT_GT(port, 0);
  HttpClient c("127.0.0.1", port);
  EXPECT_EQ(c.get("/health").body, R"({"status":"ok"})");
  // The served id is the file stem, as in the README's examples.
  EXPECT_EQ(json::parse(c.get("/v1/models").body)["data"][0]["id"], "stories260K");
  const HttpResponse r = c.post("/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"stream":true})");
  EXPECT_TRUE(split_sse(r.body).has_value()) << r.body;
  c.close();
  EXPECT_EQ(p.stop(SIGTERM), 0);
}

// SIGTERM drains: a stream already running finishes whole, while new
// requests get 503 server_shutting_down; then the process exits 0.
TEST(ServerProcess, SigtermLetsRunningStreamsFinishAndRefusesNewRequests) {
  NEXUS_REQUIRE_SHARED(model, kModel);
  ChildProcess p({nexus_binary(), "serve", "-m", model, "--port", "0", "--threads", "1"});
  const uint16_t port = listening_port(p);
  ASSERT_GT(port, 0);
  HttpClient stream("127.0.0.1", port), other("127.0.0.1", port);
  ASSERT_EQ(other.get("/health").status, 200);  // connected before the signal
  const int kTokens = 1900;
  stream.send("POST", "/v1/completions",
              json{{"prompt", "Once upon a time"}, {"max_tokens", kTokens}, {"ignore_eos", true}, {"stream", true},
                   {"temperature", 0}}.dump());
  ASSERT_EQ(stream.read_header().status, 200);
  ASSERT_TRUE(stream.next_event().has_value());
  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);

  // A request that beat the signal to the server is still served; once the
  // drain has begun, they are refused.
  HttpResponse refused;
  for (int i = 0; i < 500; ++i) {
    refused = other.post("/v1/completions", R"({"prompt":"Hi","max_tokens":1})");
    if (refused.status != 200) break;
  }
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(json::parse(refused.body, nullptr, false)["error"]["code"], "server_shutting_down") << refused.body;
  EXPECT_EQ(refused.header("retry-after"), "1");

  int tokens = 1;
  bool done = false;
  std::string finish_reason;
  while (auto ev = stream.next_event()) {
    if (*ev == "data: [DONE]") {
      done = true;
      continue;
    }
    const json j = json::parse(ev->substr(6));
    if (!j["choices"].empty() && j["choices"][0]["finish_reason"].is_string())
      finish_reason = j["choices"][0]["finish_reason"];
    ++tokens;
  }
  EXPECT_TRUE(done) << "the stream was cut off";
  EXPECT_EQ(finish_reason, "length");
  EXPECT_GE(tokens, kTokens);
  EXPECT_EQ(p.stop(0), 0);
}

// A second SIGTERM stops at once, but the generations it cuts short still
// get an ending: the stream an SSE error event (code server_shutting_down,
// as the requests refused during the drain) and [DONE], the non-streaming
// request a 503 with the same code; neither connection is just reset.
TEST(ServerProcess, SecondSigtermEndsUnfinishedResponsesWithAnError) {
  NEXUS_REQUIRE_SHARED(model, kModel);
  ChildProcess p({nexus_binary(), "serve", "-m", model, "--port", "0", "--threads", "1", "--drain-timeout", "600"});
  const uint16_t port = listening_port(p);
  ASSERT_GT(port, 0);
  HttpClient stream("127.0.0.1", port), whole("127.0.0.1", port), other("127.0.0.1", port);
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 1900}, {"ignore_eos", true}, {"temperature", 0}};
  json streamed = body;
  streamed["stream"] = true;
  stream.send("POST", "/v1/completions", streamed.dump());
  ASSERT_EQ(stream.read_header().status, 200);
  ASSERT_TRUE(stream.next_event().has_value());
  whole.send("POST", "/v1/completions", body.dump());
  // Both generations run before the first signal (the server's own count).
  double running = 0;
  for (int i = 0; i < 2000 && running < 2; ++i)
    running = metric_value(parse_metrics_text(other.get("/metrics").body), "nexus_running_sequences").value_or(0);
  ASSERT_EQ(running, 2) << "the non-streaming request never started";

  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);
  for (int i = 0; i < 500; ++i)  // the drain has begun once new requests are refused
    if (other.post("/v1/completions", R"({"prompt":"Hi","max_tokens":1})").status == 503) break;
  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);

  std::string last;
  bool done = false;
  while (auto ev = stream.next_event()) {
    if (*ev == "data: [DONE]") done = true;
    else last = *ev;
  }
  EXPECT_TRUE(done) << "the stream was cut off";
  ASSERT_TRUE(last.starts_with("data: ")) << last;
  const json err = json::parse(last.substr(6), nullptr, false);
  EXPECT_EQ(err["error"]["code"], "server_shutting_down") << last;

  const HttpResponse head = whole.read_header();
  const HttpResponse r = whole.finish();
  EXPECT_EQ(head.status, 503) << r.body;
  EXPECT_EQ(head.header("retry-after"), "1");
  EXPECT_EQ(json::parse(r.body, nullptr, false)["error"]["code"], "server_shutting_down") << r.body;
  stream.close();  // the server then exits without waiting for them to hang up
  whole.close();
  EXPECT_EQ(p.stop(0), 0);
}

TEST(ServerProcess, SigintStopsItEvenWhenStartedWithSigintIgnored) {
  NEXUS_REQUIRE_SHARED(model, kModel);
  // Shells start background jobs so; exec keeps an ignored disposition.
  auto* previous = std::signal(SIGINT, SIG_IGN);
  ChildProcess p({nexus_binary(), "serve", "-m", model, "--port", "0", "--threads", "1"});
  std::signal(SIGINT, previous);
  ASSERT_TRUE(p.read_line().has_value());
  EXPECT_EQ(p.stop(SIGINT), 0);
}

TEST(ServerProcess, MissingModelIsAClearError) {
  ChildProcess p({nexus_binary(), "serve", "-m", "/nonexistent/model.gguf", "--port", "0"});
  EXPECT_FALSE(p.read_line(std::chrono::seconds(30)).has_value());  // exits without listening
  EXPECT_EQ(p.stop(0), 1);
}
