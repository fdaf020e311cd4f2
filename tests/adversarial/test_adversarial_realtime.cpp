// The adversarial suite, realtime input (issue 26, finding 1): clients that
// queue far more input than the context holds, in messages under the size
// limit, while normal streams run. Every oversized input.append gets an
// `error` input_too_large at once (its size is measured without a JSON
// parse, realtime_input_probe.h; it is never tokenized or kept). Past two
// refused messages a session is read at 1 MiB/s, and once its refused
// messages pass 4 x the body limit (4 MiB) it gets an `error` input_flood
// and a close frame 1008, the rest it sends discarded unread
// (realtime_session.h). A new session then works, the normal streams
// complete, /metrics counts the cut-offs, and afterwards the checks of
// probe.h hold (a normal completion within 100 ms, nothing running, KV
// idle, RSS back within 20 MB). Shrunk from the 4 x 300 MB to
// 4 x ~10 MB; the pacing makes the flood last ~3.5 s. The normal streams'
// ITL p99 during the flood against the same streams alone for 3 s before
// (after a warm-up round) is printed, not asserted: on CI's 2 shared cores,
// under ASan, a latency ratio is noise (docs/benchmarks.md has the
// measured ratio).
//
// The flooding clients share the server's cores here; in production they
// are other machines. So that the ratio measures what the flood costs the
// server, the flood's frame is built once, before the flood starts (each
// client's JSON dump of it took ~4 ms, all at the flood's start, on the
// cores the streams use). The flooders run at the streams' priority: with
// the frame built before, perf sched showed them on a core for ~5% of the
// time the stream clients waited 0.5 ms or more (docs/benchmarks.md).
// CTest label `adversarial`.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "adversarial/probe.h"
#include "support/http_client.h"
#include "support/metrics_text.h"
#include "support/ws_client.h"

using namespace nexus::test;
using namespace nexus::test::adversarial;
using nlohmann::json;

namespace {

constexpr int kFloodClients = 4;
constexpr int kFramesPerClient = 12;
constexpr size_t kFrameText = 900 << 10;  // under the 1 MiB message limit with its JSON around it
constexpr size_t kRefusedBudget = 4 << 20;  // 4 x the default body limit
constexpr int kNormalStreams = 8;  // the count

struct FloodResult {
  int too_large = 0;          // input_too_large errors answering input.append
  int floods = 0;             // input_flood errors
  int close_code = -1;
  bool answered_after = false;  // a new session then answers a small input
  std::string failure;
};

// Inter-token gaps of streamed completions, in microseconds.
class ItlRecorder {
 public:
  void add(std::vector<double> gaps) {
    std::lock_guard<std::mutex> lock(mu_);
    gaps_.insert(gaps_.end(), gaps.begin(), gaps.end());
  }
  double p99() {
    std::lock_guard<std::mutex> lock(mu_);
    if (gaps_.empty()) return 0;
    std::sort(gaps_.begin(), gaps_.end());
    return gaps_[std::min(gaps_.size() - 1, gaps_.size() * 99 / 100)];
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return gaps_.size();
  }

 private:
  std::mutex mu_;
  std::vector<double> gaps_;
};

// One streamed completion; true when it ended with [DONE].
bool normal_stream(uint16_t port, ItlRecorder& itl) {
  HttpClient c("127.0.0.1", port);
  c.send("POST", "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 64}, {"stream", true}}.dump());
  if (c.read_header().status != 200) throw std::runtime_error("not 200");
  bool done = false;
  std::vector<double> gaps;
  std::optional<std::chrono::steady_clock::time_point> last;
  while (auto ev = c.next_event()) {
    done = done || *ev == "data: [DONE]";
    if (done) continue;
    const auto now = std::chrono::steady_clock::now();
    if (last) gaps.push_back(std::chrono::duration<double, std::micro>(now - *last).count());
    last = now;
  }
  itl.add(std::move(gaps));
  return done;
}

// kNormalStreams clients, each streaming one completion after another
// until stop() (at least one each), their gaps recorded in `itl`.
class StreamLoop {
 public:
  StreamLoop(uint16_t port, ItlRecorder& itl) {
    for (int i = 0; i < kNormalStreams; ++i)
      threads_.emplace_back([this, port, &itl] {
        do {
          try {
            (normal_stream(port, itl) ? done_ : failed_).fetch_add(1);
          } catch (const std::exception&) {
            failed_.fetch_add(1);
          }
        } while (running_.load());
      });
  }
  ~StreamLoop() { stop(); }
  void stop() {
    running_.store(false);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  int done() const { return done_.load(); }
  int failed() const { return failed_.load(); }

 private:
  std::atomic<bool> running_{true};
  std::atomic<int> done_{0}, failed_{0};
  std::vector<std::thread> threads_;
};

FloodResult flood(uint16_t port, const std::string& frame) {
  FloodResult r;
  try {
    WsClient c("127.0.0.1", port);
    if (c.recv_json()["type"] != "session.created") throw std::runtime_error("no session.created");
    // Every write succeeds: the server reads what it refuses, then, cut
    // off, drains the rest below the WebSocket layer.
    for (int i = 0; i < kFramesPerClient; ++i) c.send_text(frame);
    c.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 3}}}});
    while (const auto msg = c.recv()) {
      const json e = json::parse(*msg);
      if (e["type"] != "error") continue;
      const std::string code = e["error"]["code"];
      if (code == "input_too_large" && e["error"]["event"] == "input.append" && r.floods == 0) ++r.too_large;
      else if (code == "input_flood") ++r.floods;
      else r.failure += e.dump() + "\n";
    }
    r.close_code = c.close_code();
    WsClient fresh("127.0.0.1", port);
    if (fresh.recv_json()["type"] != "session.created") throw std::runtime_error("no session.created after");
    fresh.send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
    fresh.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 3}}}});
    r.answered_after = fresh.recv_until("response.done")["response"]["finish_reason"].is_string();
    fresh.close();
  } catch (const std::exception& e) {
    r.failure += e.what();
  }
  return r;
}

}  // namespace

TEST(AdversarialRealtime, FloodOfQueuedInputIsRefusedBeforeTokenizingWhileStreamsRun) {
  const std::string model = shared_model_path("stories260K.gguf");
  if (!require_file(model)) GTEST_SKIP() << "stories260K.gguf not in ../shared/models";
  // A 4 MiB KV pool (about 400 blocks: room for every stream here): the
  // prefix cache keeps finished streams' blocks, so each new sampled
  // continuation touches pool pages never touched before, and the default
  // 20 MiB pool alone would grow RSS past the 20 MB bound without any leak.
  ProbeServer server(model, {"--kv-memory", "4M"});
  ASSERT_TRUE(server.started());

  std::string words;
  words.reserve(kFrameText);
  while (words.size() + 6 <= kFrameText) words += "lorem ";
  const std::string frame = json{{"type", "input.append"}, {"text", words}}.dump();

  // The baseline: a warm-up round, then the streams alone for about as
  // long as the flood lasts (the paced flood takes ~3.5 s).
  ItlRecorder warm_up, alone;
  StreamLoop(server.port(), warm_up).stop();
  StreamLoop baseline(server.port(), alone);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  baseline.stop();
  EXPECT_EQ(baseline.failed(), 0);
  // Marked after the baseline: 8 concurrent streams' working set is the
  // steady state; what the flood leaves on top of it must go away.
  const ProbeMark mark = server.mark();

  ItlRecorder flooded;
  StreamLoop normal(server.port(), flooded);
  std::vector<FloodResult> results(kFloodClients);
  std::vector<std::thread> flooders;
  for (int i = 0; i < kFloodClients; ++i)
    flooders.emplace_back([&, i] { results[static_cast<size_t>(i)] = flood(server.port(), frame); });
  for (std::thread& t : flooders) t.join();
  normal.stop();

  // Refused until the refused bytes pass the budget: the message that
  // passes it is the last one read.
  const int refused_before_cut = static_cast<int>(kRefusedBudget / frame.size()) + 1;
  ASSERT_LT(refused_before_cut, kFramesPerClient);
  for (const FloodResult& r : results) {
    EXPECT_EQ(r.too_large, refused_before_cut) << r.failure;
    EXPECT_EQ(r.floods, 1) << r.failure;
    EXPECT_EQ(r.close_code, 1008) << r.failure;  // policy violation
    EXPECT_TRUE(r.answered_after) << r.failure;
    EXPECT_EQ(r.failure, "");
  }
  EXPECT_EQ(normal.failed(), 0);
  const double p99_alone = alone.p99(), p99_flooded = flooded.p99();
  std::printf("normal streams' ITL p99: %.0f us alone (%zu gaps), %.0f us during the flood (%zu gaps): %.2fx\n",
              p99_alone, alone.size(), p99_flooded, flooded.size(), p99_alone > 0 ? p99_flooded / p99_alone : 0.0);
  EXPECT_GE(normal.done(), kNormalStreams);
  HttpClient m("127.0.0.1", server.port());
  EXPECT_EQ(metric_value(parse_metrics_text(m.get("/metrics").body), "nexus_realtime_sessions_cut_off_total"),
            kFloodClients);
  server.expect_recovered(mark, "realtime flood");
}
