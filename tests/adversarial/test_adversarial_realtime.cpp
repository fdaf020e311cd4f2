// The adversarial suite, realtime input (issue 26, finding 1): clients that
// queue far more input than the context holds, in messages under the size
// limit, while normal streams run. Every oversized input.append gets an
// `error` input_too_large at once (it is refused before it is tokenized or
// kept), the sessions go on, the normal streams complete, and afterwards the
// checks of probe.h hold (a normal completion within 100 ms, nothing running,
// KV idle, RSS back within 20 MB). Shrunk from the 4 x 300 MB to
// 4 x ~10 MB so it runs in seconds (under ASan too); no wall-time assertion.
// CTest label `adversarial`.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "adversarial/probe.h"
#include "support/http_client.h"
#include "support/ws_client.h"

using namespace nexus::test;
using namespace nexus::test::adversarial;
using nlohmann::json;

namespace {

constexpr int kFloodClients = 4;
constexpr int kFramesPerClient = 12;
constexpr size_t kFrameText = 900 << 10;  // under the 1 MiB message limit with its JSON around it
constexpr int kNormalStreams = 2;

struct FloodResult {
  int too_large = 0;          // input_too_large errors answering input.append
  int other_errors = 0;
  bool no_input = false;      // response.create after the flood: nothing was kept
  bool answered_after = false;  // a small input afterwards gets its response
  std::string failure;
};

FloodResult flood(uint16_t port, const std::string& text) {
  FloodResult r;
  try {
    WsClient c("127.0.0.1", port);
    if (c.recv_json()["type"] != "session.created") throw std::runtime_error("no session.created");
    const std::string frame = json{{"type", "input.append"}, {"text", text}}.dump();
    for (int i = 0; i < kFramesPerClient; ++i) c.send_text(frame);
    c.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 3}}}});
    while (r.too_large + r.other_errors < kFramesPerClient + 1) {
      const json e = c.recv_json();
      if (e["type"] != "error") continue;
      const std::string code = e["error"]["code"];
      if (code == "input_too_large" && e["error"]["event"] == "input.append") ++r.too_large;
      else if (code == "no_input") r.no_input = true, ++r.other_errors;
      else ++r.other_errors, r.failure += e.dump() + "\n";
    }
    c.send_json({{"type", "input.append"}, {"text", "Once upon a time"}});
    c.send_json({{"type", "response.create"}, {"response", {{"max_tokens", 3}}}});
    r.answered_after = c.recv_until("response.done")["response"]["finish_reason"].is_string();
    c.close();
  } catch (const std::exception& e) {
    r.failure += e.what();
  }
  return r;
}

}  // namespace

TEST(AdversarialRealtime, FloodOfQueuedInputIsRefusedBeforeTokenizingWhileStreamsRun) {
  const std::string model = shared_model_path("stories260K.gguf");
  if (!require_file(model)) GTEST_SKIP() << "stories260K.gguf not in ../shared/models";
  ProbeServer server(model);
  ASSERT_TRUE(server.started());
  const ProbeMark mark = server.mark();

  std::string words;
  words.reserve(kFrameText);
  while (words.size() + 6 <= kFrameText) words += "lorem ";

  std::atomic<bool> flooding{true};
  std::atomic<int> streams_done{0}, streams_failed{0};
  std::vector<std::thread> normal;
  for (int i = 0; i < kNormalStreams; ++i) {
    normal.emplace_back([&] {
      // Streams one after another until the flood is over (at least one each).
      do {
        try {
          HttpClient c("127.0.0.1", server.port());
          c.send("POST", "/v1/completions",
                 json{{"prompt", "Once upon a time"}, {"max_tokens", 64}, {"stream", true}}.dump());
          bool done = false;
          if (c.read_header().status != 200) throw std::runtime_error("not 200");
          while (auto ev = c.next_event()) done = done || *ev == "data: [DONE]";
          (done ? streams_done : streams_failed).fetch_add(1);
        } catch (const std::exception&) {
          streams_failed.fetch_add(1);
        }
      } while (flooding.load());
    });
  }
  std::vector<FloodResult> results(kFloodClients);
  std::vector<std::thread> flooders;
  for (int i = 0; i < kFloodClients; ++i)
    flooders.emplace_back([&, i] { results[static_cast<size_t>(i)] = flood(server.port(), words); });
  for (std::thread& t : flooders) t.join();
  flooding.store(false);
  for (std::thread& t : normal) t.join();

  for (const FloodResult& r : results) {
    EXPECT_EQ(r.too_large, kFramesPerClient) << r.failure;
    EXPECT_TRUE(r.no_input) << "response.create after the flood found input queued: " << r.failure;
    EXPECT_TRUE(r.answered_after) << r.failure;
    EXPECT_EQ(r.failure, "");
  }
  EXPECT_EQ(streams_failed.load(), 0);
  EXPECT_GE(streams_done.load(), kNormalStreams);
  server.expect_recovered(mark, "realtime flood");
}
