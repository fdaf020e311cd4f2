// Continuous batching on the real F32 models: 16 concurrent greedy requests
// (different prompts and lengths) each return exactly what they return alone
// -- with the default budget, a chunk budget of 7 tokens, a warm prefix
// cache, and a KV pool of a few blocks that forces preemption. Plus
// priorities, cancellation and the pool bounds.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "model/synth.h"
#include "support/event_collector.h"
#include "support/loaded_model.h"
#include "support/requests.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace nexus;

namespace {

using Loaded = nexus::test::LoadedModel;
Loaded& load(const std::string& path) { return nexus::test::loaded_model(path); }

using Result = nexus::test::EventCollector;

using test::greedy;

// Submits every request at once, waits for all; returns each one's tokens.
std::vector<std::vector<int32_t>> run_concurrently(Engine& e, const std::vector<GenerationRequest>& reqs,
                                                   std::vector<GenerationEvent>* finals = nullptr) {
  std::vector<std::shared_ptr<Result>> results;
  for (const GenerationRequest& r : reqs) {
    auto res = std::make_shared<Result>();
    EXPECT_NE(e.submit(r, [res](const GenerationEvent& ev) { res->on(ev); }), nullptr);
    results.push_back(res);
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& r : results) {
    EXPECT_TRUE(r->wait()) << "a request never finished";
    EXPECT_EQ(r->finals, 1);
    EXPECT_EQ(r->final_event.finish, FinishReason::Length) << r->final_event.error;
    out.push_back(r->tokens);
    if (finals) finals->push_back(r->final_event);
  }
  return out;
}

// 16 requests: prompts of 1 to ~40 tokens cut from a story (several share
// their beginning, as chat turns and system prompts do), outputs of 4 to 50.
std::vector<GenerationRequest> sixteen_requests(const Tokenizer& tok) {
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog Max. "
      "One day, the sun was hot and the sky was blue. Lily saw a big red ball under a tree and ran to get it.";
  const std::vector<int32_t> all = tok.encode(story, true);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 16; ++i) {
    const size_t len = std::min(all.size(), static_cast<size_t>(1 + (i * 7) % 41));
    std::vector<int32_t> prompt(all.begin(), all.begin() + static_cast<ptrdiff_t>(len));
    if (i % 3 == 2) prompt.push_back(all[(i * 5) % all.size()]);  // a different last token
    reqs.push_back(greedy(prompt, 4 + (i * 13) % 47));
  }
  return reqs;
}

EngineOptions opts(int32_t n_ctx = 0) {
  EngineOptions o;
  o.n_threads = 2;
  o.n_ctx = n_ctx;
  return o;
}

// Each request alone, on a fresh engine: the reference.
std::vector<std::vector<int32_t>> run_alone(const Loaded& m, const std::vector<GenerationRequest>& reqs,
                                            EngineOptions o) {
  std::vector<std::vector<int32_t>> out;
  o.max_seqs = 1;
  for (const GenerationRequest& r : reqs) {
    Engine e(m.model, *m.tok, o);
    out.push_back(run_concurrently(e, {r})[0]);
  }
  return out;
}

// The 16 requests at once, in four engine setups, each equal to their solo
// runs; the setups' own checks (prefix hits, preemptions) show that real
// multi-sequence batches ran.
void sixteen_requests_match_their_solo_runs(Loaded& m) {
  const std::vector<GenerationRequest> reqs = sixteen_requests(*m.tok);
  const auto alone = run_alone(m, reqs, opts(120));

  {  // default budget: everything in a few big batches
    Engine e(m.model, *m.tok, opts(120));
    EXPECT_EQ(run_concurrently(e, reqs), alone);
  }
  {  // chunk budget of 7 tokens per step: prefills in chunks, decodes round-robin
    EngineOptions o = opts(120);
    o.max_batch_tokens = 7;
    Engine e(m.model, *m.tok, o);
    EXPECT_EQ(run_concurrently(e, reqs), alone);
  }
  {  // prefix reuse: the second round finds the prompts' full blocks cached
    Engine e(m.model, *m.tok, opts(120));
    EXPECT_EQ(run_concurrently(e, reqs), alone);
    std::vector<GenerationEvent> finals;
    EXPECT_EQ(run_concurrently(e, reqs, &finals), alone);
    int32_t cached = 0;
    for (const GenerationEvent& f : finals) cached += f.usage.cached_tokens;
    EXPECT_GT(cached, 16 * 8) << "the second round should reuse most prompt blocks";
    EXPECT_GT(e.stats().prefix_hit_tokens, 0);
  }
  {  // a pool of 8 blocks (128 positions) for 16 sequences: preemption
    EngineOptions o = opts(120);
    o.kv_memory = static_cast<int64_t>(KvCache::block_bytes(m.model.config(), kDefaultBlockSize, KvType::F16)) * 8;
    Engine e(m.model, *m.tok, o);
    EXPECT_EQ(e.stats().kv_blocks_total, 8);
    EXPECT_EQ(run_concurrently(e, reqs), alone);
    EXPECT_GT(e.stats().preemptions, 0) << "the small pool should have forced preemption";
  }
}

class BatchingOnModel : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchingOnModel, SixteenConcurrentGreedyRequestsMatchTheirSoloRuns) {
  NEXUS_REQUIRE_SHARED(path, GetParam());
  sixteen_requests_match_their_solo_runs(load(path));
}

INSTANTIATE_TEST_SUITE_P(F32Models, BatchingOnModel,
                         ::testing::Values("stories260K.gguf", "TinyLLama-v0.F32.gguf"),
                         [](const auto& info) { return info.index == 0 ? "stories260K" : "TinyLLamaV0"; });

// "arch/qwen2-d256-F32.gguf" -> "qwen2".
std::string family_name(const char* path) {
  const std::string s = std::string(path).substr(5);
  return s.substr(0, s.find('-'));
}

// Every family (model/arch.h) through the same engine paths: biases, NEOX
// RoPE, fused tensors, LayerNorm, GELU, rope_freqs, and gemma2's windowed,
// soft-capped attention over the paged F16 cache and the prefix cache.
INSTANTIATE_TEST_SUITE_P(Families, BatchingOnModel,
                         ::testing::Values("arch/llama3rope-d256-F32.gguf", "arch/qwen2-d256-F32.gguf",
                                           "arch/phi3-d256-F32.gguf", "arch/starcoder2-d256-F32.gguf",
                                           "arch/gemma2-d64-F32.gguf"),
                         [](const auto& info) { return family_name(info.param); });

// The families with no file in arch/ (qwen3, gemma3): small random F32 models
// written here by the project's synth (model/synth.h), with the 512-token
// vocabulary of stories260K.gguf (as `nexus synth --vocab-from`) and a
// 256-token context. qwen3: QK-norm and a head size (32) independent of
// n_embd (4 heads: Q is 128 wide for n_embd 64). gemma3: QK-norm, 6 layers so
// that the 5 local : 1 global pattern has its global layer, local RoPE base
// 10000 next to a global 1e6, and a window of 8 positions, shorter than most
// prompts and outputs, so the windowed layers' KV blocks are released and the
// prefix cache must respect that (as gemma2-d64's window 8).
// Written and loaded once per binary; the file is removed once mapped.
Loaded& synthesized_family(const std::string& arch, const std::string& vocab) {
  static std::map<std::string, Loaded*> models;
  Loaded*& m = models[arch];
  if (!m) {
    SynthOptions opt;
    SynthShape& s = opt.shape;
    s.n_embd = 64, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 128, s.n_ctx = 256;
    if (arch == "qwen3") s.head_dim = 32;
    if (arch == "gemma3") s.n_layer = 6, s.rope_freq_base = 1e6f;
    synth_set_arch(s, arch);
    if (arch == "gemma3") s.n_swa = 8;
    opt.type = GgmlType::F32;
    opt.vocab_path = vocab;
    opt.n_threads = 2;
    const std::string dir = test::make_temp_dir(), path = dir + "/" + arch + "-d64-F32.gguf";
    synth_model(opt, path);
    m = &load(path);
    std::filesystem::remove_all(dir);
  }
  return *m;
}

class BatchingOnSynthesizedFamily : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchingOnSynthesizedFamily, SixteenConcurrentGreedyRequestsMatchTheirSoloRuns) {
  NEXUS_REQUIRE_SHARED(vocab, "stories260K.gguf");
  const std::string arch = GetParam();
  Loaded& m = synthesized_family(arch, vocab);
  const LlamaConfig& c = m.model.config();
  ASSERT_EQ(c.arch, arch);
  ASSERT_GE(c.n_ctx_train, 120);
  if (arch == "qwen3") {
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_NE(c.head_dim * c.n_head, c.n_embd);
  } else {
    EXPECT_EQ(c.n_swa, 8);
    EXPECT_EQ(c.rope_freq_base, 1e6f);
    EXPECT_EQ(c.rope_freq_base_swa, 10000.0f);
    for (int32_t l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.is_swa(l), l != 5) << l;
  }
  sixteen_requests_match_their_solo_runs(m);
}

INSTANTIATE_TEST_SUITE_P(Families, BatchingOnSynthesizedFamily, ::testing::Values("qwen3", "gemma3"),
                         [](const auto& info) { return std::string(info.param); });

#define LOAD_STORIES(var)                               \
  NEXUS_REQUIRE_SHARED(var##_path, "stories260K.gguf"); \
  Loaded& var = load(var##_path)

TEST(EngineBatching, InteractivePreemptsBatchWhenTheSequenceSlotsAreFull) {
  LOAD_STORIES(m);
  const std::vector<int32_t> prompt = m.tok->encode("Once upon a time", true);
  const auto alone = run_alone(m, {greedy(prompt, 300)}, opts());
  EngineOptions o = opts();
  o.max_seqs = 1;
  Engine e(m.model, *m.tok, o);
  auto batch = std::make_shared<Result>(), inter = std::make_shared<Result>();
  std::mutex order_mu;
  std::vector<char> order;  // which request finished first
  auto tagged = [&](char tag, std::shared_ptr<Result> r) {
    return [&, tag, r](const GenerationEvent& ev) {
      if (ev.done) {
        std::lock_guard lock(order_mu);
        order.push_back(tag);
      }
      r->on(ev);
    };
  };
  ASSERT_NE(e.submit(greedy(prompt, 300, kPriorityBatch), tagged('b', batch)), nullptr);
  while (e.stats().running == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_NE(e.submit(greedy(m.tok->encode("Lily and Tom", true), 5, kPriorityInteractive), tagged('i', inter)),
            nullptr);
  ASSERT_TRUE(inter->wait());
  ASSERT_TRUE(batch->wait());
  EXPECT_EQ(order, (std::vector<char>{'i', 'b'}));
  EXPECT_GE(e.stats().preemptions, 1);
  EXPECT_EQ(batch->tokens, alone[0]) << "the preempted request must continue as if uninterrupted";
}

TEST(EngineBatching, SeededSamplingSurvivesPreemption) {
  LOAD_STORIES(m);
  GenerationRequest r = greedy(m.tok->encode("Once upon a time", true), 40);
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 7;
  std::vector<GenerationRequest> reqs(6, r);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].sampling.seed = 7 + i;
  const auto alone = run_alone(m, reqs, opts(64));
  EngineOptions o = opts(64);
  o.kv_memory = static_cast<int64_t>(KvCache::block_bytes(m.model.config(), kDefaultBlockSize, KvType::F16)) * 5;
  Engine e(m.model, *m.tok, o);
  EXPECT_EQ(run_concurrently(e, reqs), alone);
  EXPECT_GT(e.stats().preemptions, 0);
}

// The engine samples a step's rows on its kernel threads at once: each
// sequence's sampler (and the buffer its penalties edit) is its own, so a
// seeded, penalized request in a batch of eight draws what it draws alone.
TEST(EngineBatching, SeededPenalizedSamplingInABatchMatchesSoloRuns) {
  LOAD_STORIES(m);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerationRequest r = greedy(m.tok->encode(i % 2 ? "Once upon a time" : "Lily and Max", true), 30 + i);
    r.sampling.temperature = 0.7f + 0.1f * static_cast<float>(i % 3);
    r.sampling.top_p = 0.9f;
    r.sampling.repeat_penalty = 1.3f;
    r.sampling.seed = 100 + static_cast<uint64_t>(i);
    reqs.push_back(r);
  }
  const auto alone = run_alone(m, reqs, opts());
  Engine e(m.model, *m.tok, opts());
  EXPECT_EQ(run_concurrently(e, reqs), alone);
}

TEST(EngineBatching, CancelReturnsTheBlocksInTheNextStep) {
  LOAD_STORIES(m);
  Engine e(m.model, *m.tok, opts());
  const int32_t used_before = e.stats().kv_blocks_used;
  auto res = std::make_shared<Result>();
  std::promise<std::shared_ptr<RequestHandle>> handle_p;
  std::shared_future<std::shared_ptr<RequestHandle>> handle_f = handle_p.get_future().share();
  int n = 0;
  int64_t steps_at_cancel = 0;
  auto h = e.submit(greedy(m.tok->encode("Once upon a time", true), 1000), [&, res, handle_f](const GenerationEvent& ev) {
    if (++n == 40) {
      steps_at_cancel = e.stats().steps;
      handle_f.get()->cancel();
    }
    res->on(ev);
  });
  ASSERT_NE(h, nullptr);
  handle_p.set_value(h);
  ASSERT_TRUE(res->wait());
  EXPECT_EQ(res->final_event.finish, FinishReason::Cancelled);
  EXPECT_EQ(res->tokens.size(), 40u);
  EngineStats s;
  for (int i = 0; i < 1000; ++i) {  // the stats are published after each step
    s = e.stats();
    if (s.running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(s.kv_blocks_used, used_before);
  EXPECT_EQ(s.running, 0);
  EXPECT_LE(s.steps, steps_at_cancel + 2) << "the blocks must be freed in the step after the cancel";
}

TEST(EngineBatching, ContextIsCappedToWhatThePoolHolds) {
  LOAD_STORIES(m);
  EngineOptions o = opts();
  o.kv_memory = static_cast<int64_t>(KvCache::block_bytes(m.model.config(), kDefaultBlockSize, KvType::F16)) * 4;
  Engine e(m.model, *m.tok, o);
  EXPECT_EQ(e.n_ctx(), 4 * kDefaultBlockSize);
  // A prompt that could never fit is refused at once.
  auto res = std::make_shared<Result>();
  ASSERT_NE(e.submit(greedy(std::vector<int32_t>(64, 1), 4), [res](const GenerationEvent& ev) { res->on(ev); }),
            nullptr);
  ASSERT_TRUE(res->wait());
  EXPECT_EQ(res->final_event.finish, FinishReason::Error);
  EXPECT_NE(res->final_event.error.find("context"), std::string::npos) << res->final_event.error;
  // One that fits runs until the pool (its context) is full.
  const auto out = run_concurrently(e, {greedy({1, 403}, 1000)});
  EXPECT_EQ(out[0].size(), 4u * kDefaultBlockSize - 2);  // prompt + output = the context
  EXPECT_THROW(
      {
        EngineOptions tiny = opts();
        tiny.kv_memory = 1;
        Engine bad(m.model, *m.tok, tiny);
      },
      Error);
}

TEST(EngineBatching, PriorityOutOfRangeIsAnError) {
  LOAD_STORIES(m);
  Engine e(m.model, *m.tok, opts());
  auto res = std::make_shared<Result>();
  e.submit(greedy({1, 403}, 3, kPriorityMax + 1), [res](const GenerationEvent& ev) { res->on(ev); });
  ASSERT_TRUE(res->wait());
  EXPECT_EQ(res->final_event.finish, FinishReason::Error);
  EXPECT_NE(res->final_event.error.find("priority"), std::string::npos);
}

}  // namespace

namespace {

// The stats are published after each step, a moment after the final event.
EngineStats settled_stats(Engine& e, const std::function<bool(const EngineStats&)>& done) {
  EngineStats s = e.stats();
  for (int i = 0; i < 2000 && !done(s); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = e.stats();
  }
  return s;
}

GenerationRequest in_session(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t session) {
  GenerationRequest r = greedy(std::move(prompt), max_tokens);
  r.session = session;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(EngineSessions, NextTurnPrefillsOnlyWhatIsNew) {
  LOAD_STORIES(m);
  const std::vector<int32_t> p = m.tok->encode("Once upon a time", true);
  const std::vector<int32_t> x = m.tok->encode(" Then Lily said", false);
  Engine e(m.model, *m.tok, opts());
  std::vector<GenerationEvent> f1, f2;
  const auto g = run_concurrently(e, {in_session(p, 21, 5)}, &f1)[0];
  EXPECT_EQ(settled_stats(e, [](const EngineStats& s) { return s.sessions_kept == 1; }).sessions_kept, 1);
  const std::vector<int32_t> turn2 = concat(concat(p, g), x);
  const auto out = run_concurrently(e, {in_session(turn2, 12, 5)}, &f2)[0];
  // Kept: the prompt and every generated token but the last (sampled, never evaluated).
  EXPECT_EQ(f2[0].usage.cached_tokens, static_cast<int32_t>(p.size() + g.size() - 1));
  EXPECT_EQ(out, run_alone(m, {greedy(turn2, 12)}, opts())[0]);
}

TEST(EngineSessions, RedirectAfterCancelContinuesFromWhatWasKept) {
  LOAD_STORIES(m);
  const std::vector<int32_t> p = m.tok->encode("Lily and Tom went to the park", true);
  const std::vector<int32_t> x = m.tok->encode(" But the dog", false);
  Engine e(m.model, *m.tok, opts());
  auto res = std::make_shared<Result>();
  std::promise<std::shared_ptr<RequestHandle>> hp;
  std::shared_future<std::shared_ptr<RequestHandle>> hf = hp.get_future().share();
  int n = 0;
  auto h = e.submit(in_session(p, 1000, 9), [&, res, hf](const GenerationEvent& ev) {
    if (++n == 10) hf.get()->cancel();
    res->on(ev);
  });
  hp.set_value(h);
  ASSERT_TRUE(res->wait());
  ASSERT_EQ(res->final_event.finish, FinishReason::Cancelled);
  ASSERT_EQ(res->tokens.size(), 10u);
  const std::vector<int32_t> turn2 = concat(concat(p, res->tokens), x);
  std::vector<GenerationEvent> f2;
  const auto out = run_concurrently(e, {in_session(turn2, 15, 9)}, &f2)[0];
  EXPECT_EQ(f2[0].usage.cached_tokens, static_cast<int32_t>(p.size() + 9));
  EXPECT_EQ(out, run_alone(m, {greedy(turn2, 15)}, opts())[0]);
}

TEST(EngineSessions, ADivergingPromptKeepsOnlyTheCommonPrefix) {
  LOAD_STORIES(m);
  const std::vector<int32_t> p = m.tok->encode(
      "Once upon a time there was a little girl named Lily who loved to play outside in the sun", true);
  Engine e(m.model, *m.tok, opts());
  run_concurrently(e, {in_session(p, 30, 3)});
  std::vector<int32_t> edited(p.begin(), p.begin() + 20);  // an edited history: same start, new end
  const std::vector<int32_t> tail = m.tok->encode(" and a big red ball", false);
  edited = concat(edited, tail);
  std::vector<GenerationEvent> f;
  const auto out = run_concurrently(e, {in_session(edited, 10, 3)}, &f)[0];
  // The 20 common tokens end inside the second block (positions 16..31),
  // which the first request filled and shared through the prefix cache: it
  // is never written again, so it is dropped whole and 16 tokens are kept.
  EXPECT_EQ(f[0].usage.cached_tokens, 16);
  EXPECT_EQ(out, run_alone(m, {greedy(edited, 10)}, opts())[0]);
}

TEST(EngineSessions, EndSessionAndMemoryPressureReleaseTheKeptBlocks) {
  LOAD_STORIES(m);
  EngineOptions o = opts();
  o.kv_memory = static_cast<int64_t>(KvCache::block_bytes(m.model.config(), kDefaultBlockSize, KvType::F16)) * 6;
  Engine e(m.model, *m.tok, o);
  const std::vector<int32_t> p = m.tok->encode("Once upon a time", true);
  run_concurrently(e, {in_session(p, 40, 1)});
  EngineStats s = settled_stats(e, [](const EngineStats& s) { return s.sessions_kept == 1; });
  EXPECT_EQ(s.sessions_kept, 1);
  EXPECT_GT(s.kv_blocks_used, 0);
  e.end_session(1);
  s = settled_stats(e, [](const EngineStats& s) { return s.sessions_kept == 0; });
  EXPECT_EQ(s.sessions_kept, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  // Under pressure a kept session goes before anything is preempted.
  run_concurrently(e, {in_session(p, 40, 2)});
  EXPECT_EQ(settled_stats(e, [](const EngineStats& s) { return s.sessions_kept == 1; }).sessions_kept, 1);
  run_concurrently(e, {greedy(m.tok->encode("Tom had a big dog", true), 90)});  // needs all 6 blocks
  EXPECT_EQ(settled_stats(e, [](const EngineStats& s) { return s.sessions_kept == 0; }).sessions_kept, 0);
  EXPECT_EQ(e.stats().preemptions, 0);
}

}  // namespace

namespace {

// The accuracy cost of a quantized KV cache on the shared greedy references:
// how many leading tokens agree with the reference, printed for
// docs/benchmarks.md and bounded below.
TEST(EngineKvTypes, Q8_0CacheFollowsTheGreedyReferences) {
  struct Case {
    const char* model;
    const char* reference;
    size_t min_agree;
  };
  for (const Case& c : {Case{"stories260K.gguf", "reference/stories260K__Once_upon_a_time.json", 10},
                        Case{"TinyLLama-v0.F32.gguf", "reference/TinyLLama-v0.F32__Once_upon_a_time.json", 10}}) {
    NEXUS_REQUIRE_SHARED(path, c.model);
    NEXUS_REQUIRE_SHARED(ref_path, c.reference);
    const std::string text = nexus::test::read_file(ref_path);
    const auto j = nlohmann::json::parse(text);
    const auto prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
    const auto expected = j.at("greedy_ids").get<std::vector<int32_t>>();
    Loaded& m = load(path);
    for (KvType type : {KvType::F16, KvType::Q8_0}) {
      EngineOptions o = opts();
      o.kv_type = type;
      Engine e(m.model, *m.tok, o);
      GenerationRequest r = greedy(prompt, static_cast<int32_t>(expected.size()));
      r.stop.ignore_eos = false;
      auto res = std::make_shared<Result>();
      e.submit(r, [res](const GenerationEvent& ev) { res->on(ev); });
      ASSERT_TRUE(res->wait());
      size_t agree = 0;
      while (agree < expected.size() && agree < res->tokens.size() && res->tokens[agree] == expected[agree]) ++agree;
      std::printf("%s, %s KV: %zu of %zu greedy tokens agree with the reference\n", c.model, kv_type_name(type), agree,
                  expected.size());
      EXPECT_GE(agree, std::min(c.min_agree, expected.size())) << c.model << " " << kv_type_name(type);
    }
  }
}

}  // namespace
