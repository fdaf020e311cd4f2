// n > 1 end to end (server/choices.h): `nexus serve`'s HTTP server over the
// real Engine (stories260K). Each choice equals a single request with its
// derived seed, streamed and not; the later choices reuse the prompt's KV
// through the prefix cache; usage counts the prompt once; a client that
// leaves cancels every choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/engine_metrics.h"
#include "server/choices.h"
#include "server/choices_formatter.h"
#include "support/engine_server.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class ServerChoices : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 512;
    start("stories260K.gguf", eo);
  }

  // The streamed choices' texts by index, checking the chunks' shape.
  std::map<int, std::string> streamed_texts(const json& body, bool chat, json* usage) {
    json b = body;
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
    const HttpResponse r = post_raw(chat ? "/v1/chat/completions" : "/v1/completions", b);
    EXPECT_EQ(r.status, 200) << r.body;
    const auto events = split_sse(r.body);
    EXPECT_TRUE(events.has_value());
    std::map<int, std::string> texts;
    std::map<int, int> finishes;
    bool done = false;
    for (const std::string& ev : events.value_or(std::vector<std::string>{})) {
      if (ev == "[DONE]") { done = true; continue; }
      // (value(), not operator[]: a const json's operator[] on a missing key
      // is undefined -- the role and the finish chunks' delta has no
      // "content", and ASan caught the read)
      const json c = json::parse(ev);
      const json choices = c.value("choices", json::array());
      if (choices.empty()) { *usage = c.value("usage", json()); continue; }
      for (const json& ch : choices) {
        const int i = ch.value("index", -1);
        if (!ch.value("finish_reason", json()).is_null()) ++finishes[i];
        const json piece = chat ? ch.value("delta", json::object()).value("content", json()) : ch.value("text", json());
        if (piece.is_string()) texts[i] += piece.get<std::string>();
      }
    }
    EXPECT_TRUE(done);
    for (const auto& [i, n] : finishes) EXPECT_EQ(n, 1) << "choice " << i;
    EXPECT_EQ(finishes.size(), texts.size());
    return texts;
  }
};

}  // namespace

TEST(Choices, SeedsAreTheRequestSeedPlusTheIndex) {
  GenerationRequest first;
  first.sampling.seed = 41;
  const auto more = server::more_choices(first, 4);
  ASSERT_EQ(more.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*more[static_cast<size_t>(i)].sampling.seed, 42u + i);
  first.sampling.seed = ~uint64_t{0};  // wraps
  EXPECT_EQ(*server::more_choices(first, 2)[0].sampling.seed, 0u);
  first.sampling.seed.reset();  // none: each choice draws its own
  EXPECT_FALSE(server::more_choices(first, 2)[0].sampling.seed.has_value());
}

namespace {

GenerationEvent event(const std::string& text, bool done = false, FinishReason r = FinishReason::Stop) {
  GenerationEvent ev;
  ev.text = text;
  ev.done = done;
  ev.finish = r;
  ev.usage = {5, 2, 1};
  return ev;
}

server::ResponseMeta stream_meta() {
  server::ResponseMeta m;
  m.endpoint = server::Endpoint::ChatCompletions;
  m.stream = true;
  m.include_usage = true;
  m.id = "chatcmpl-x";
  return m;
}

}  // namespace

TEST(ChoicesFormatter, StreamsEndOnceWithTheUsageSummed) {
  server::ChoicesFormatter f(stream_meta(), 2);
  std::string sse = f.stream_preamble();
  sse += f.on_event(event("a"), 1);
  sse += f.on_event(event("b", true), 0);
  EXPECT_FALSE(f.finished());
  EXPECT_EQ(sse.find("[DONE]"), std::string::npos);
  sse += f.on_event(event("c", true, FinishReason::Length), 1);
  EXPECT_TRUE(f.finished());
  const auto events = split_sse(sse);
  ASSERT_TRUE(events.has_value());
  ASSERT_EQ(events->back(), "[DONE]");
  const json usage = json::parse((*events)[events->size() - 2]);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 5);       // once
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);   // 2 + 2
  std::map<int, int> roles, finishes;
  for (size_t i = 0; i + 2 < events->size(); ++i) {
    const json c = json::parse((*events)[i]);
    const json& ch = c["choices"][0];
    if (ch["delta"].contains("role")) ++roles[ch["index"].get<int>()];
    if (!ch["finish_reason"].is_null()) ++finishes[ch["index"].get<int>()];
  }
  EXPECT_EQ(roles, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
}

TEST(ChoicesFormatter, AFailedChoiceEndsTheResponse) {
  server::ChoicesFormatter f(stream_meta(), 3);
  GenerationEvent err = event("", true, FinishReason::Error);
  err.error = "boom";
  const std::string out = f.on_event(err, 2);
  EXPECT_TRUE(f.finished());
  EXPECT_NE(out.find("boom"), std::string::npos);
  EXPECT_NE(out.find("[DONE]"), std::string::npos);
  EXPECT_EQ(f.on_event(event("late"), 0), "");
  server::ResponseMeta m = stream_meta();
  m.stream = false;
  server::ChoicesFormatter g(m, 2);
  EXPECT_EQ(g.on_event(event("x", true), 0), "");
  g.on_event(err, 1);
  EXPECT_TRUE(g.finished());
  EXPECT_EQ(g.status(), 500);
}

TEST_F(ServerChoices, EachChoiceEqualsASingleRequestWithItsDerivedSeed) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 1}, {"seed", 1000},
                     {"n", 4}, {"best_of", 4}};
  const json j = post("/v1/completions", body);
  ASSERT_EQ(j["choices"].size(), 4u) << j.dump();
  int64_t completion = 0;
  std::set<std::string> distinct;
  for (int i = 0; i < 4; ++i) {
    const json& c = j["choices"][static_cast<size_t>(i)];
    EXPECT_EQ(c["index"], i);
    json single = body;
    single.erase("best_of");
    single["n"] = 1;
    single["seed"] = 1000 + i;
    const json s = post("/v1/completions", single);
    EXPECT_EQ(c["text"], s["choices"][0]["text"]) << i;
    EXPECT_EQ(c["finish_reason"], s["choices"][0]["finish_reason"]) << i;
    EXPECT_EQ(j["usage"]["prompt_tokens"], s["usage"]["prompt_tokens"]);  // counted once
    completion += s["usage"]["completion_tokens"].get<int64_t>();
    distinct.insert(c["text"].get<std::string>());
  }
  EXPECT_GT(distinct.size(), 1u);  // temperature 1, different seeds
  EXPECT_EQ(j["usage"]["completion_tokens"], completion);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int64_t>() + completion);
}

TEST_F(ServerChoices, StreamedChoicesEqualNonStreamed) {
  for (const bool chat : {false, true}) {
    json body = {{"max_tokens", 10}, {"temperature", 1}, {"seed", 7}, {"n", 3}};
    if (chat) body["messages"] = {{{"role", "user"}, {"content", "Tell me a story"}}};
    else body["prompt"] = "The little dog";
    const json j = post(chat ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_EQ(j["choices"].size(), 3u) << j.dump();
    json usage;
    const auto texts = streamed_texts(body, chat, &usage);
    ASSERT_EQ(texts.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      const json& c = j["choices"][static_cast<size_t>(i)];
      EXPECT_EQ(texts.at(i), chat ? c["message"]["content"] : c["text"]) << "chat " << chat << " choice " << i;
    }
    EXPECT_EQ(usage["prompt_tokens"], j["usage"]["prompt_tokens"]);
    EXPECT_EQ(usage["completion_tokens"], j["usage"]["completion_tokens"]);
  }
}

TEST_F(ServerChoices, LaterChoicesReuseThePromptsKvBlocks) {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "Once upon a time there was a little girl. ";
  const auto n_prompt = static_cast<int64_t>(m_->tok->encode(prompt, m_->tok->add_bos_default(), true).size());
  const int64_t bs = engine_->stats().block_size;
  ASSERT_GT(n_prompt, 2 * bs) << "the prompt must span full blocks";
  const json j = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}, {"n", 4}, {"seed", 3}});
  ASSERT_EQ(j["choices"].size(), 4u) << j.dump();
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_prompt);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);  // choice 0 computed it
  // Choices 1..3 each found every full block but the one holding the
  // prompt's last token (which is always recomputed).
  EXPECT_EQ(engine_->stats().prefix_hit_tokens, 3 * ((n_prompt - 1) / bs) * bs);
}

TEST_F(ServerChoices, AClientThatLeavesCancelsEveryChoice) {
  HttpClient c("127.0.0.1", server_->port());
  c.send("POST", "/v1/completions",
         json{{"prompt", "x"}, {"max_tokens", 480}, {"ignore_eos", true}, {"n", 4}, {"stream", true}}.dump());
  ASSERT_EQ(c.read_header().status, 200);
  std::set<int> seen;
  while (seen.size() < 4) {  // every choice under way
    const auto ev = c.next_event();
    ASSERT_TRUE(ev.has_value());
    const json chunk = json::parse(ev->substr(6));  // "data: {...}"
    for (const json& ch : chunk["choices"]) seen.insert(ch["index"].get<int>());
  }
  c.close();
  bool all_cancelled = false;
  for (int i = 0; i < 1000 && !all_cancelled; ++i) {  // bounded wait for a hang, not a time limit
    all_cancelled = engine_->metrics().render().find("nexus_requests_total{finish_reason=\"cancelled\"} 4") !=
                    std::string::npos;
    if (!all_cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(all_cancelled) << engine_->metrics().render();
}
