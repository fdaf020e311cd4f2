// Sliding-window attention in the engine's paged KV cache, on the gemma2
// reference model (window 8 on its 13 even layers, arch/README.md): a
// 2,000-token greedy generation holds at most ceil(8 / 16) + 1 = 2 windowed
// blocks at once while the global layers keep the whole history; its tokens
// equal those of a run that re-prefills the whole prompt from scratch at
// every step (LlamaContext: one pool, nothing given back) and, for the first
// 32, llama.cpp's greedy ids; and a later prompt that continues it reuses the
// cached prefix and still generates what a fresh prefill does.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/kv_cache.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "support/arch_ref.h"
#include "support/event_collector.h"
#include "support/loaded_model.h"
#include "support/requests.h"
#include "support/test_support.h"

using namespace nexus;

namespace {

using test::greedy;

std::shared_ptr<test::EventCollector> run(Engine& e, GenerationRequest r) {
  auto res = std::make_shared<test::EventCollector>();
  EXPECT_NE(e.submit(std::move(r), test::into(res)), nullptr);
  EXPECT_TRUE(res->wait(600)) << "the request never finished";
  EXPECT_EQ(res->final_event.finish, FinishReason::Length) << res->final_event.error;
  return res;
}

// The greedy id after each prefix prompt + out[:k], k < n, each prefilled
// from scratch into an empty cache.
std::vector<int32_t> reprefilled_greedy(const LlamaModel& model, std::vector<int32_t> prompt,
                                        const std::vector<int32_t>& out, size_t n) {
  LlamaContext ctx(model, 0, 2);
  std::vector<int32_t> ids;
  for (size_t k = 0; k < n; ++k) {
    ctx.truncate(0);
    ids.push_back(test::argmax(ctx.eval(prompt)));
    prompt.push_back(out[k]);
  }
  return ids;
}

// The stats are published after each step, a moment after the final event.
EngineStats settled_stats(Engine& e) {
  EngineStats s = e.stats();
  for (int i = 0; i < 5000 && (s.running != 0 || s.kv_swa_blocks_used != 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = e.stats();
  }
  return s;
}

}  // namespace

TEST(EngineWindow, LongGenerationHoldsTheWindowAndMatchesAFreshPrefillAtEveryStep) {
  NEXUS_REQUIRE_SHARED(path, "arch/gemma2-d64-F32.gguf");
  NEXUS_REQUIRE_SHARED(ref_path, "arch/gemma2-d64-F32.ref.json");
  test::LoadedModel& m = test::loaded_model(path);
  const test::ArchRef ref = test::load_arch_ref(ref_path);
  const LlamaConfig& c = m.model.config();
  ASSERT_EQ(c.n_swa, 8);
  EngineOptions o;
  o.n_threads = 2;
  o.kv_type = KvType::F32;  // the same bits as LlamaContext's cache
  o.max_seqs = 4;
  Engine e(m.model, *m.tok, o);
  const EngineStats before = e.stats();
  ASSERT_EQ(before.swa_window, 8);
  // 4 sequences of ceil((8 - 1 + 128) / 16) + 1 = 10 windowed blocks each.
  ASSERT_EQ(before.kv_swa_blocks_total, 40) << "gemma2's windowed layers should have their own pool";

  constexpr int32_t kTokens = 2000;
  const auto res = run(e, greedy(ref.prompt_ids, kTokens));
  ASSERT_EQ(res->tokens.size(), static_cast<size_t>(kTokens));
  const EngineStats s = settled_stats(e);
  const int32_t bound = (c.n_swa + s.block_size - 1) / s.block_size + 1;  // window + one block
  EXPECT_LE(s.kv_swa_blocks_per_seq_max, bound) << "windowed KV must stay within the window";
  EXPECT_GT(s.kv_swa_blocks_per_seq_max, 0);
  // The global layers kept all 2,031 computed positions (now cached for
  // reuse); the windowed pool of 40 blocks held the 127 blocks' worth the
  // run went through.
  EXPECT_GE(s.kv_blocks_cached, (kTokens + 31) / s.block_size);
  EXPECT_EQ(s.kv_swa_blocks_used, 0);

  const std::vector<int32_t> first(res->tokens.begin(), res->tokens.begin() + 32);
  EXPECT_EQ(first, ref.greedy_ids) << "the engine's windowed cache must follow llama.cpp";
  const std::vector<int32_t> fresh = reprefilled_greedy(m.model, ref.prompt_ids, res->tokens, 64);
  EXPECT_EQ(std::vector<int32_t>(res->tokens.begin(), res->tokens.begin() + 64), fresh);

  // The whole run as a prompt: its global blocks are cached, and so are the
  // windowed ones its first query reads (given back last), so the prefix is
  // reused -- and the next token is what the uninterrupted decode gave.
  std::vector<int32_t> prompt = ref.prompt_ids;
  prompt.insert(prompt.end(), res->tokens.begin(), res->tokens.end() - 1);
  const auto again = run(e, greedy(prompt, 1));
  EXPECT_EQ(again->final_event.usage.cached_tokens, 2016);
  ASSERT_EQ(again->tokens.size(), 1u);
  EXPECT_EQ(again->tokens[0], res->tokens.back());
  EXPECT_LE(e.stats().kv_swa_blocks_per_seq_max, bound);
}

// With a windowed pool too small to keep the blocks the long run gave back,
// a prompt continuing it finds its global prefix but not the window: the
// engine must recompute rather than reuse K/V it no longer has.
TEST(EngineWindow, APrefixWhoseWindowWasEvictedIsRecomputed) {
  NEXUS_REQUIRE_SHARED(path, "arch/gemma2-d64-F32.gguf");
  test::LoadedModel& m = test::loaded_model(path);
  EngineOptions o;
  o.n_threads = 2;
  o.kv_type = KvType::F32;
  o.max_seqs = 1;
  o.max_batch_tokens = 16;
  Engine e(m.model, *m.tok, o);
  ASSERT_GT(e.stats().kv_swa_blocks_total, 0);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 1045 % 512};
  const auto res = run(e, greedy(prompt, 300));
  std::vector<int32_t> longer = prompt;
  longer.insert(longer.end(), res->tokens.begin(), res->tokens.begin() + 120);
  const auto again = run(e, greedy(longer, 6));
  EXPECT_EQ(again->tokens, reprefilled_greedy(m.model, longer, again->tokens, 6));
  const int32_t cached = again->final_event.usage.cached_tokens;
  EXPECT_LT(cached, 112) << "the window at position 112 was evicted (pool of " << e.stats().kv_swa_blocks_total
                         << " windowed blocks)";
  EXPECT_EQ(cached % 16, 0);
}
