// Engine: greedy generation against the shared references, FIFO order,
// cancellation, stop strings, limits, errors, queue bounds and seeding, on
// the real stories260K model.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "support/event_collector.h"
#include "support/loaded_model.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace nexus;

namespace {

using Loaded = nexus::test::LoadedModel;
using nexus::test::loaded_model;

#define LOAD_STORIES(var)                                  \
  NEXUS_REQUIRE_SHARED(var##_path, "stories260K.gguf");    \
  Loaded& var = loaded_model(var##_path)

struct Reference {
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::string text;
  int32_t n_predict = 0;
};

Reference load_reference(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("prompt_ids").get<std::vector<int32_t>>(), j.at("greedy_ids").get<std::vector<int32_t>>(),
          j.at("text").get<std::string>(), j.at("n_predict").get<int32_t>()};
}

using Collector = nexus::test::EventCollector;
using nexus::test::into;

GenerationRequest greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.stop.max_tokens = max_tokens;
  return r;
}

std::shared_ptr<Collector> run_sync(Engine& e, GenerationRequest req) {
  auto c = std::make_shared<Collector>();
  EXPECT_NE(e.submit(std::move(req), into(c)), nullptr);
  EXPECT_TRUE(c->wait()) << "no final event";
  return c;
}

EngineOptions small_opts(int32_t n_ctx = 0) {
  EngineOptions o;
  o.n_threads = 1;
  o.n_ctx = n_ctx;
  return o;
}

}  // namespace

TEST(Engine, FinishReasonNames) {
  EXPECT_STREQ(finish_reason_name(FinishReason::Stop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::Length), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::Cancelled), "cancelled");
  EXPECT_STREQ(finish_reason_name(FinishReason::Error), "error");
}

TEST(Engine, GreedyMatchesReferences) {
  LOAD_STORIES(m);
  Engine engine(m.model, *m.tok, small_opts());
  EXPECT_EQ(engine.n_ctx(), m.model.config().n_ctx_train);
  for (const char* name : {"stories260K__Once_upon_a_time.json", "stories260K__Lily_and_Tom_went_to_the_park.json"}) {
    NEXUS_REQUIRE_SHARED(ref_path, std::string("reference/") + name);
    const Reference ref = load_reference(ref_path);
    auto c = run_sync(engine, greedy_request(ref.prompt_ids, ref.n_predict));
    EXPECT_EQ(c->tokens, ref.greedy_ids) << name;
    // The reference "text" ends at the first newline of the generation; the
    // streamed text is the whole decode of the ids.
    EXPECT_EQ(c->text.substr(0, ref.text.size()), ref.text) << name;
    EXPECT_EQ(c->text, m.tok->decode(ref.greedy_ids, false)) << name;
    EXPECT_EQ(c->finals, 1);
    EXPECT_EQ(c->events.size(), ref.greedy_ids.size());  // one event per token, the last is final
    EXPECT_EQ(c->final_event.finish, FinishReason::Length);
    EXPECT_EQ(c->final_event.usage.prompt_tokens, static_cast<int32_t>(ref.prompt_ids.size()));
    EXPECT_EQ(c->final_event.usage.completion_tokens, static_cast<int32_t>(ref.greedy_ids.size()));
    const Timings& t = c->final_event.timings;
    EXPECT_GE(t.ttft_s + 1e-9, t.queue_s + t.prefill_s);  // ordering, not speed
    EXPECT_GE(t.decode_s, 0.0);
  }
}

TEST(Engine, WithOneSequenceAtATimeRequestsCompleteInFifoOrder) {
  LOAD_STORIES(m);
  NEXUS_REQUIRE_SHARED(a_path, "reference/stories260K__Once_upon_a_time.json");
  NEXUS_REQUIRE_SHARED(b_path, "reference/stories260K__Lily_and_Tom_went_to_the_park.json");
  const Reference a = load_reference(a_path), b = load_reference(b_path);
  EngineOptions o = small_opts();
  o.max_seqs = 1;
  Engine engine(m.model, *m.tok, o);

  std::mutex mu;
  std::vector<char> order;  // which request each event belonged to
  auto ca = std::make_shared<Collector>(), cb = std::make_shared<Collector>();
  auto tagged = [&](char tag, std::shared_ptr<Collector> c) {
    return [&, tag, c](const GenerationEvent& ev) {
      {
        std::lock_guard lock(mu);
        order.push_back(tag);
      }
      c->on(ev);
    };
  };
  ASSERT_NE(engine.submit(greedy_request(a.prompt_ids, a.n_predict), tagged('a', ca)), nullptr);
  ASSERT_NE(engine.submit(greedy_request(b.prompt_ids, b.n_predict), tagged('b', cb)), nullptr);
  ASSERT_TRUE(ca->wait()) << "no final event";
  ASSERT_TRUE(cb->wait()) << "no final event";
  std::vector<char> expected(a.greedy_ids.size(), 'a');
  expected.insert(expected.end(), b.greedy_ids.size(), 'b');
  EXPECT_EQ(order, expected);
  EXPECT_EQ(ca->tokens, a.greedy_ids);
  EXPECT_EQ(cb->tokens, b.greedy_ids);  // the cache held a's sequence: it must not leak into b
}

TEST(Engine, PromptExtendingTheCachedSequenceReusesIt) {
  // After a's generation the cache holds its prompt and output; a prompt that
  // continues it evaluates only the new tokens and must decode the same.
  LOAD_STORIES(m);
  NEXUS_REQUIRE_SHARED(a_path, "reference/stories260K__Once_upon_a_time.json");
  const Reference a = load_reference(a_path);
  Engine engine(m.model, *m.tok, small_opts());
  run_sync(engine, greedy_request(a.prompt_ids, 20));
  std::vector<int32_t> prompt = a.prompt_ids;
  prompt.insert(prompt.end(), a.greedy_ids.begin(), a.greedy_ids.begin() + 30);
  auto c = run_sync(engine, greedy_request(prompt, 20));
  EXPECT_EQ(c->tokens, std::vector<int32_t>(a.greedy_ids.begin() + 30, a.greedy_ids.begin() + 50));
  // And the same prompt twice (everything cached) gives the same again.
  auto again = run_sync(engine, greedy_request(prompt, 20));
  EXPECT_EQ(again->tokens, c->tokens);
}

TEST(Engine, CancelFromTheCallbackStopsAtOnce) {
  LOAD_STORIES(m);
  Engine engine(m.model, *m.tok, small_opts());
  std::promise<std::shared_ptr<RequestHandle>> handle_p;
  std::shared_future<std::shared_ptr<RequestHandle>> handle_f = handle_p.get_future().share();
  auto c = std::make_shared<Collector>();
  GenerationRequest req = greedy_request(m.tok->encode("Once upon a time", true), 100);
  req.stop.ignore_eos = true;
  int n = 0;
  auto h = engine.submit(std::move(req), [&, c, handle_f](const GenerationEvent& ev) {
    if (++n == 5) handle_f.get()->cancel();
    c->on(ev);  // last: once the final event is in, the test may end
  });
  ASSERT_NE(h, nullptr);
  handle_p.set_value(h);
  ASSERT_TRUE(c->wait()) << "no final event";
  EXPECT_EQ(c->final_event.finish, FinishReason::Cancelled);
  EXPECT_EQ(c->tokens.size(), 5u);  // no token sampled after the cancel
  EXPECT_EQ(c->final_event.token, -1);
  EXPECT_EQ(c->final_event.usage.completion_tokens, 5);
}

TEST(Engine, CancelFromAnotherThread) {
  LOAD_STORIES(m);
  Engine engine(m.model, *m.tok, small_opts());
  std::promise<void> first_p, cancelled_p;
  std::shared_future<void> cancelled_f = cancelled_p.get_future().share();
  auto c = std::make_shared<Collector>();
  GenerationRequest req = greedy_request(m.tok->encode("Once upon a time", true), 1000);
  req.stop.ignore_eos = true;
  bool first = true;
  auto h = engine.submit(std::move(req), [&, c, cancelled_f](const GenerationEvent& ev) {
    if (first) {  // hold the engine until the test thread has cancelled
      first = false;
      first_p.set_value();
      cancelled_f.wait();
    }
    c->on(ev);  // last: once the final event is in, the test may end
  });
  ASSERT_NE(h, nullptr);
  first_p.get_future().wait();
  h->cancel();
  cancelled_p.set_value();
  ASSERT_TRUE(c->wait()) << "no final event";
  EXPECT_EQ(c->final_event.finish, FinishReason::Cancelled);
  EXPECT_EQ(c->tokens.size(), 1u);
}

TEST(Engine, StopStringsEndTheGenerationAndAreWithheld) {
  LOAD_STORIES(m);
  NEXUS_REQUIRE_SHARED(a_path, "reference/stories260K__Once_upon_a_time.json");
  const Reference a = load_reference(a_path);
  Engine engine(m.model, *m.tok, small_opts());
  // The reference text: ", there was a little girl named Lily. She loved ..."
  for (const std::string stop : {"Lily", "girl named", "e was a"}) {
    GenerationRequest req = greedy_request(a.prompt_ids, a.n_predict);
    req.stop.stop = {"never appears", stop};
    auto c = run_sync(engine, std::move(req));
    EXPECT_EQ(c->final_event.finish, FinishReason::Stop) << stop;
    EXPECT_EQ(c->text, a.text.substr(0, a.text.find(stop))) << stop;
    EXPECT_LT(c->tokens.size(), a.greedy_ids.size()) << stop;
  }
}

TEST(Engine, MaxTokensEndsWithLength) {
  LOAD_STORIES(m);
  NEXUS_REQUIRE_SHARED(a_path, "reference/stories260K__Once_upon_a_time.json");
  const Reference a = load_reference(a_path);
  Engine engine(m.model, *m.tok, small_opts());
  auto c = run_sync(engine, greedy_request(a.prompt_ids, 5));
  EXPECT_EQ(c->final_event.finish, FinishReason::Length);
  EXPECT_EQ(c->tokens, std::vector<int32_t>(a.greedy_ids.begin(), a.greedy_ids.begin() + 5));
  EXPECT_EQ(c->final_event.usage.completion_tokens, 5);
  EXPECT_EQ(c->events.size(), 5u);
}

TEST(Engine, FullContextEndsWithLength) {
  LOAD_STORIES(m);
  Engine engine(m.model, *m.tok, small_opts(32));
  EXPECT_EQ(engine.n_ctx(), 32);
  std::vector<int32_t> prompt(28, 300);
  prompt[0] = m.tok->bos_id();
  GenerationRequest req = greedy_request(prompt, 100);
  req.stop.ignore_eos = true;
  auto c = run_sync(engine, std::move(req));
  EXPECT_EQ(c->final_event.finish, FinishReason::Length);
  // Prompt + output fill the 32 positions and no more.
  EXPECT_EQ(c->final_event.usage.completion_tokens, 32 - 28);
  EXPECT_EQ(c->tokens.size(), 4u);
}

TEST(Engine, InvalidRequestsGetOneErrorEvent) {
  LOAD_STORIES(m);
  Engine engine(m.model, *m.tok, small_opts(32));
  auto expect_error = [&](GenerationRequest req, const std::string& needle) {
    auto c = run_sync(engine, std::move(req));
    EXPECT_EQ(c->events.size(), 1u) << needle;
    EXPECT_EQ(c->final_event.finish, FinishReason::Error) << needle;
    EXPECT_NE(c->final_event.error.find(needle), std::string::npos) << c->final_event.error;
    EXPECT_TRUE(c->tokens.empty());
  };
  expect_error(greedy_request(std::vector<int32_t>(32, 1), 4), "context");  // prompt + 1 > n_ctx
  expect_error(greedy_request({}, 4), "empty");
  expect_error(greedy_request({1, 512}, 4), "outside the vocabulary");
  expect_error(greedy_request({1, -3}, 4), "outside the vocabulary");
  expect_error(greedy_request({1, 2}, -1), "max_tokens");
  GenerationRequest bad_sampling = greedy_request({1, 2}, 4);
  bad_sampling.sampling.top_p = 2.0f;
  expect_error(bad_sampling, "top_p");
  // The engine still works afterwards.
  auto ok = run_sync(engine, greedy_request(std::vector<int32_t>(31, 1), 4));
  EXPECT_NE(ok->final_event.finish, FinishReason::Error);
}

TEST(Engine, FullQueueRefusesSubmissions) {
  LOAD_STORIES(m);
  EngineOptions o = small_opts();
  o.max_queue = 1;
  o.max_seqs = 1;
  Engine engine(m.model, *m.tok, o);
  std::promise<void> entered_p, release_p;
  std::shared_future<void> release_f = release_p.get_future().share();
  auto ca = std::make_shared<Collector>();
  bool first = true;
  ASSERT_NE(engine.submit(greedy_request({1, 403}, 3),
                          [&, ca, release_f](const GenerationEvent& ev) {
                            if (first) {  // keep the engine busy with this request
                              first = false;
                              entered_p.set_value();
                              release_f.wait();
                            }
                            ca->on(ev);  // last: once the final event is in, the test may end
                          }),
            nullptr);
  entered_p.get_future().wait();  // a is running, the queue is empty
  auto cb = std::make_shared<Collector>();
  EXPECT_NE(engine.submit(greedy_request({1, 403}, 3), into(cb)), nullptr);  // queue: 1 of 1
  EXPECT_EQ(engine.submit(greedy_request({1, 403}, 3), into(std::make_shared<Collector>())), nullptr);
  release_p.set_value();
  ASSERT_TRUE(ca->wait()) << "no final event";
  ASSERT_TRUE(cb->wait()) << "no final event";
  EXPECT_EQ(cb->final_event.finish, FinishReason::Length);
  // Room again.
  auto cc = run_sync(engine, greedy_request({1, 403}, 3));
  EXPECT_EQ(cc->final_event.finish, FinishReason::Length);
}

TEST(Engine, SameSeedSameTextDifferentSeedDifferentText) {
  LOAD_STORIES(m);
  Engine engine(m.model, *m.tok, small_opts());
  auto sampled = [&](uint64_t seed) {
    GenerationRequest req;
    req.prompt = m.tok->encode("Once upon a time", true);
    req.sampling.temperature = 1.0f;
    req.sampling.top_k = 40;
    req.sampling.seed = seed;
    req.stop.max_tokens = 48;
    req.stop.ignore_eos = true;
    return run_sync(engine, std::move(req))->text;
  };
  const std::string a = sampled(42);
  EXPECT_EQ(sampled(42), a);
  EXPECT_NE(sampled(43), a);
}

TEST(Engine, ThrowingCallbackGetsOneErrorEventAndTheEngineGoesOn) {
  LOAD_STORIES(m);
  Engine engine(m.model, *m.tok, small_opts());
  auto c = std::make_shared<Collector>();
  engine.submit(greedy_request({1, 403}, 10), [c](const GenerationEvent& ev) {
    c->on(ev);
    if (!ev.done) throw std::runtime_error("consumer went away");
  });
  ASSERT_TRUE(c->wait()) << "no final event";
  EXPECT_EQ(c->finals, 1);
  EXPECT_EQ(c->final_event.finish, FinishReason::Error);
  EXPECT_EQ(c->final_event.error, "consumer went away");
  auto ok = run_sync(engine, greedy_request({1, 403}, 3));
  EXPECT_EQ(ok->final_event.finish, FinishReason::Length);
}

TEST(Engine, DestructorCancelsRunningAndQueued) {
  LOAD_STORIES(m);
  auto ca = std::make_shared<Collector>(), cb = std::make_shared<Collector>();
  {
    // Declared before the engine: the callback uses them until ~Engine returns.
    std::promise<void> entered_p;
    std::shared_ptr<RequestHandle> ha;
    std::mutex ha_mu;
    bool first = true;
    Engine engine(m.model, *m.tok, small_opts());
    GenerationRequest req = greedy_request({1, 403}, 1000);
    req.stop.ignore_eos = true;
    auto h = engine.submit(std::move(req), [&, ca](const GenerationEvent& ev) {
      ca->on(ev);
      if (!first) return;
      first = false;
      entered_p.set_value();
      // Hold the engine until the destructor has cancelled this request.
      for (int i = 0; i < 10000; ++i) {
        {
          std::lock_guard lock(ha_mu);
          if (ha && ha->cancelled()) return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    {
      std::lock_guard lock(ha_mu);
      ha = h;
    }
    entered_p.get_future().wait();
    ASSERT_NE(engine.submit(greedy_request({1, 403}, 3), into(cb)), nullptr);
  }  // ~Engine
  EXPECT_TRUE(ca->done);
  EXPECT_TRUE(cb->done);
  EXPECT_EQ(ca->final_event.finish, FinishReason::Cancelled);
  EXPECT_EQ(ca->tokens.size(), 1u);
  EXPECT_EQ(cb->final_event.finish, FinishReason::Cancelled);
  EXPECT_TRUE(cb->tokens.empty());
}

TEST(Engine, BadOptionsThrow) {
  LOAD_STORIES(m);
  EXPECT_THROW(Engine(m.model, *m.tok, small_opts(m.model.config().n_ctx_train + 1)), Error);
  EngineOptions o = small_opts();
  o.max_queue = 0;
  EXPECT_THROW(Engine(m.model, *m.tok, o), Error);
}
