// BatchForward + BlockManager against LlamaContext: continuous-batching
// greedy decoding (each step: one decode token per running sequence plus
// prefill chunks of at most 7 tokens for sequences being admitted) must
// produce exactly the tokens -- and the bits of the logits -- of each
// sequence run alone. That holds for float weights with an F32 KV cache
// (forward_steps.h, matmul.h: per-token results do not depend on the batch);
// an F16 cache rounds K/V, so there only batch independence is exact.
#include <gtest/gtest.h>

#include <cstdio>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/block_manager.h"
#include "gguf/gguf_file.h"
#include "model/batch_forward.h"
#include "model/kv_cache.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace nexus;

namespace {

struct Loaded {
  explicit Loaded(const std::string& path) : gguf(path), model(gguf) {}
  GgufFile gguf;
  LlamaModel model;
};

struct Job {
  Job() = default;
  Job(std::vector<int32_t> p, int32_t n) : prompt(std::move(p)), n_gen(n) {}
  std::vector<int32_t> prompt;
  int32_t n_gen = 0;
  std::vector<int32_t> out;           // generated tokens
  std::vector<float> first_logits;    // after the prompt
  int32_t matched = 0;                // prompt tokens found in the prefix cache
  int32_t evaluated = 0;              // prompt tokens run through the model
};

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Each job alone through LlamaContext: the prompt in one batch, then greedy.
void run_alone(const LlamaModel& model, Job& job) {
  LlamaContext ctx(model, 0, 2);
  std::span<const float> logits = ctx.eval(job.prompt);
  job.first_logits.assign(logits.begin(), logits.end());
  while (static_cast<int32_t>(job.out.size()) < job.n_gen) {
    job.out.push_back(argmax(logits));
    if (static_cast<int32_t>(job.out.size()) < job.n_gen) logits = ctx.eval(std::span(&job.out.back(), 1));
  }
}

// Continuous batching over `jobs`: at most `admit` new sequences join per
// step; each prefilling sequence contributes a chunk of <= `chunk` prompt
// tokens, each running one its last sampled token.
void run_batched(BatchForward& fwd, BlockManager& bm, std::vector<Job*> jobs, bool prefix_cache, int32_t chunk = 7,
                 size_t admit = 2) {
  struct Active {
    Job* job;
    BlockManager::SeqId seq;
    int32_t done = 0;  // prompt tokens in the cache
  };
  std::vector<Active> active;
  size_t next = 0;
  while (next < jobs.size() || !active.empty()) {
    for (size_t i = 0; i < admit && next < jobs.size(); ++i, ++next) {
      Active a{jobs[next], bm.create()};
      if (prefix_cache) a.done = a.job->matched = bm.match_prefix(a.seq, a.job->prompt);
      active.push_back(a);
    }
    // Reserve every sequence's slots first, then build the runs (block tables are final).
    std::vector<std::span<const int32_t>> step_tokens;
    for (Active& a : active) {
      const int32_t prompt_len = static_cast<int32_t>(a.job->prompt.size());
      std::span<const int32_t> toks =
          a.done < prompt_len ? std::span(a.job->prompt).subspan(a.done, std::min(chunk, prompt_len - a.done))
                              : std::span(&a.job->out.back(), 1);
      ASSERT_TRUE(bm.append(a.seq, toks)) << "pool too small for the test";
      step_tokens.push_back(toks);
    }
    std::vector<SeqRun> runs;
    for (size_t i = 0; i < active.size(); ++i) {
      const Active& a = active[i];
      const int32_t n_past = bm.n_tokens(a.seq) - static_cast<int32_t>(step_tokens[i].size());
      const bool prefill_done =
          n_past + static_cast<int32_t>(step_tokens[i].size()) >= static_cast<int32_t>(a.job->prompt.size());
      runs.push_back({step_tokens[i], n_past, bm.block_table(a.seq), prefill_done});
    }
    std::span<const float> logits = fwd.forward(runs);
    const size_t n_vocab = static_cast<size_t>(fwd.model().config().n_vocab);
    ASSERT_EQ(logits.size(), n_vocab * static_cast<size_t>(std::count_if(runs.begin(), runs.end(),
                                                                          [](const SeqRun& r) { return r.want_logits; })));
    size_t row = 0;
    for (size_t i = 0; i < active.size(); ++i) {
      Active& a = active[i];
      bm.commit(a.seq);
      if (a.done < static_cast<int32_t>(a.job->prompt.size())) {
        a.done += static_cast<int32_t>(step_tokens[i].size());
        a.job->evaluated += static_cast<int32_t>(step_tokens[i].size());
      }
      if (!runs[i].want_logits) continue;
      std::span<const float> l = logits.subspan(row++ * n_vocab, n_vocab);
      if (a.job->out.empty()) a.job->first_logits.assign(l.begin(), l.end());
      a.job->out.push_back(argmax(l));
    }
    for (size_t i = active.size(); i-- > 0;)
      if (static_cast<int32_t>(active[i].job->out.size()) >= active[i].job->n_gen) {
        bm.release(active[i].seq);
        active.erase(active.begin() + static_cast<ptrdiff_t>(i));
      }
    bm.validate();
  }
}

// 16 prompts: BOS then random ids, lengths 1..~45, 6..22 tokens to generate.
std::vector<Job> make_jobs(int32_t n_vocab, int32_t max_prompt, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Job> jobs(16);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int32_t len = 1 + static_cast<int32_t>((i * 11 + rng() % 5) % static_cast<size_t>(max_prompt));
    jobs[i].prompt.push_back(1);
    for (int32_t j = 1; j < len; ++j) jobs[i].prompt.push_back(3 + static_cast<int32_t>(rng() % (n_vocab - 3)));
    jobs[i].n_gen = 6 + static_cast<int32_t>(i % 3) * 8;
  }
  return jobs;
}

std::vector<Job*> ptrs(std::vector<Job>& jobs) {
  std::vector<Job*> p;
  for (Job& j : jobs) p.push_back(&j);
  return p;
}

void expect_same_as_alone(const LlamaModel& model, std::vector<Job>& batched) {
  for (size_t i = 0; i < batched.size(); ++i) {
    Job alone{batched[i].prompt, batched[i].n_gen};
    run_alone(model, alone);
    EXPECT_EQ(batched[i].out, alone.out) << "sequence " << i << ", prompt of " << alone.prompt.size();
    ASSERT_EQ(batched[i].first_logits.size(), alone.first_logits.size());
    EXPECT_EQ(0, std::memcmp(batched[i].first_logits.data(), alone.first_logits.data(),
                             alone.first_logits.size() * sizeof(float)))
        << "sequence " << i << ": first-step logits differ in some bit";
  }
}

void check_batched_matches_alone(const std::string& file, int32_t max_prompt) {
  NEXUS_REQUIRE_SHARED(path, file);
  Loaded m(path);
  KvCache cache(m.model.config(), 96, 16, KvType::F32);
  BlockManager bm(cache.n_blocks(), cache.block_size());
  BatchForward fwd(m.model, cache, 2);
  std::vector<Job> jobs = make_jobs(m.model.config().n_vocab, max_prompt, 11);
  run_batched(fwd, bm, ptrs(jobs), false);
  EXPECT_EQ(bm.n_used(), 0);
  expect_same_as_alone(m.model, jobs);
}

}  // namespace

TEST(BatchForward, Stories260KBatchedGreedyMatchesLlamaContextExactly) {
  check_batched_matches_alone("stories260K.gguf", 45);
}

TEST(BatchForward, TinyLlamaF32BatchedGreedyMatchesLlamaContextExactly) {
  check_batched_matches_alone("TinyLLama-v0.F32.gguf", 40);  // context 128: prompt + 22 fits
}

// A finished sequence leaves its full blocks cached: later prompts sharing
// its prefix (including tokens it generated, as a chat's next turn does)
// prefill only what follows, concurrently sharing the blocks, and still
// decode exactly what they decode alone.
TEST(BatchForward, PrefixReuseSkipsCachedBlocksAndStillMatches) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  Loaded m(path);
  KvCache cache(m.model.config(), 64, 16, KvType::F32);
  BlockManager bm(cache.n_blocks(), cache.block_size());
  BatchForward fwd(m.model, cache, 2);
  std::vector<Job> first = make_jobs(m.model.config().n_vocab, 45, 3);
  Job a{first[0].prompt, 12};
  a.prompt.resize(1);
  a.prompt.insert(a.prompt.end(), first[15].prompt.begin() + 1, first[15].prompt.end());
  a.prompt.resize(45, 7);
  run_batched(fwd, bm, {&a}, true);
  ASSERT_EQ(bm.n_cached(), 3);  // 45 + 11 computed tokens: 3 full blocks

  Job b{std::vector<int32_t>(a.prompt.begin(), a.prompt.begin() + 37), 10};
  b.prompt.insert(b.prompt.end(), {5, 6, 7, 8, 9});
  Job c{a.prompt, 10};  // the whole first sequence, and the user's next turn
  c.prompt.insert(c.prompt.end(), a.out.begin(), a.out.begin() + 4);
  c.prompt.insert(c.prompt.end(), {11, 12});
  Job d{first[4].prompt, 10};  // unrelated
  run_batched(fwd, bm, {&b, &c, &d}, true, 7, 3);
  EXPECT_EQ(b.matched, 32);
  EXPECT_EQ(b.evaluated, 42 - 32);
  EXPECT_EQ(c.matched, 48);
  EXPECT_EQ(c.evaluated, 51 - 48);
  EXPECT_EQ(d.matched, 0);
  EXPECT_GE(bm.stats().hit_tokens, 80);
  std::vector<Job> second{b, c, d};
  expect_same_as_alone(m.model, second);
}

// With fp16 or q8_0 K/V the results are no longer LlamaContext's bits, but
// they must still not depend on what else is in the batch, and stay close to
// F32: fp16 keeps 11 significant bits (observed max logit error 1.7e-2 with
// max |logit| ~14); q8_0 about 8 per group of 32, shared by 4 of this model's
// 8-wide heads (observed 9.3e-2 of the max |logit| on random prompts).
TEST(BatchForward, ReducedPrecisionCachesAreBatchIndependentAndCloseToF32) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  Loaded m(path);
  for (auto [type, tolerance] : {std::pair{KvType::F16, 4e-3f}, std::pair{KvType::Q8_0, 0.15f}}) {
    SCOPED_TRACE(kv_type_name(type));
    KvCache cache(m.model.config(), 96, 16, type);
    BlockManager bm(cache.n_blocks(), cache.block_size());
    BatchForward fwd(m.model, cache, 2);
    std::vector<Job> batched = make_jobs(m.model.config().n_vocab, 45, 5), single = batched;
    run_batched(fwd, bm, ptrs(batched), false);
    for (Job& j : single) run_batched(fwd, bm, {&j}, false, 45, 1);  // alone, whole prompt at once
    float worst = 0;
    for (size_t i = 0; i < batched.size(); ++i) {
      EXPECT_EQ(batched[i].out, single[i].out) << "sequence " << i;
      EXPECT_EQ(batched[i].first_logits, single[i].first_logits) << "sequence " << i;
      Job f32{batched[i].prompt, 1};
      run_alone(m.model, f32);
      float max_logit = 0, max_diff = 0;
      for (size_t v = 0; v < f32.first_logits.size(); ++v) {
        max_logit = std::max(max_logit, std::abs(f32.first_logits[v]));
        max_diff = std::max(max_diff, std::abs(f32.first_logits[v] - batched[i].first_logits[v]));
      }
      EXPECT_LT(max_diff, tolerance * max_logit) << "sequence " << i;
      worst = std::max(worst, max_diff / max_logit);
    }
    std::printf("%s KV: worst first-token logit error %.2e of max |logit|\n", kv_type_name(type), worst);
  }
}

TEST(BatchForward, RejectsBadBatchesBeforeTouchingTheCache) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  Loaded m(path);
  KvCache cache(m.model.config(), 4, 16, KvType::F32);
  BatchForward fwd(m.model, cache, 1);
  const std::vector<int32_t> table{2, 0}, toks{1, 50, 60};
  SeqRun good{toks, 0, table, true};
  fwd.forward(std::span(&good, 1));
  std::vector<uint8_t> before(static_cast<const uint8_t*>(cache.data()),
                              static_cast<const uint8_t*>(cache.data()) + cache.total_bytes());
  auto rejects = [&](SeqRun bad) {
    SeqRun runs[2] = {{toks, 3, table, true}, bad};  // the valid run must not be written either
    EXPECT_THROW(fwd.forward(runs), Error);
  };
  rejects({{}, 0, table, true});                                   // empty run
  const std::vector<int32_t> bad_id{1, 512};
  rejects({bad_id, 0, table, true});                               // id >= n_vocab
  rejects({toks, 14, std::vector<int32_t>{1}, true});              // 17 positions, one block
  rejects({toks, 0, std::vector<int32_t>{4}, true});               // block outside the cache
  rejects({toks, -1, table, true});                                // negative position
  rejects({toks, m.model.config().n_ctx_train - 2, table, true});  // past the training context
  EXPECT_THROW(fwd.forward({}), Error);
  EXPECT_EQ(0, std::memcmp(before.data(), cache.data(), before.size()));

  LlamaConfig other = m.model.config();
  other.n_layer += 1;
  KvCache wrong(other, 2);
  EXPECT_THROW(BatchForward(m.model, wrong, 1), Error);
}

// A decode-only batch of a small model is split by token across the kernel
// threads (BatchForward::splits_by_token): each thread takes its tokens
// through every layer alone. The logits must be the bits of the same batch
// on one thread, step after step, and a batch with a prefill chunk is not
// split.
TEST(BatchForward, DecodeOnlyBatchSplitByTokenMatchesOneThreadBitForBit) {
  NEXUS_REQUIRE_SHARED(path, "TinyLLama-v0.F32.gguf");
  Loaded m(path);
  const int32_t n_vocab = m.model.config().n_vocab;
  struct Side {
    Side(const LlamaModel& model, int32_t threads)
        : cache(model.config(), 64, 16, KvType::F32), bm(cache.n_blocks(), cache.block_size()),
          fwd(model, cache, threads) {}
    KvCache cache;
    BlockManager bm;
    BatchForward fwd;
    std::vector<BlockManager::SeqId> seqs;
  };
  Side two(m.model, 2), one(m.model, 1);
  std::vector<Job> jobs = make_jobs(n_vocab, 40, 5);
  jobs.resize(7);
  std::vector<int32_t> last(jobs.size());
  // Prefill every prompt in one batch (not split: runs of several tokens).
  for (Side* s : {&two, &one}) {
    std::vector<SeqRun> runs;
    for (const Job& j : jobs) {
      s->seqs.push_back(s->bm.create());
      ASSERT_TRUE(s->bm.append(s->seqs.back(), j.prompt));
    }
    for (size_t i = 0; i < jobs.size(); ++i)
      runs.push_back({jobs[i].prompt, 0, s->bm.block_table(s->seqs[i]), true});
    EXPECT_FALSE(s->fwd.splits_by_token(runs));
    std::span<const float> logits = s->fwd.forward(runs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      s->bm.commit(s->seqs[i]);
      last[i] = argmax(logits.subspan(i * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab)));
    }
  }
  for (int step = 0; step < 12; ++step) {
    std::vector<float> logits_two;
    for (Side* s : {&two, &one}) {
      std::vector<SeqRun> runs;
      for (size_t i = 0; i < jobs.size(); ++i) ASSERT_TRUE(s->bm.append(s->seqs[i], std::span(&last[i], 1)));
      for (size_t i = 0; i < jobs.size(); ++i)
        runs.push_back({std::span(&last[i], 1), s->bm.n_tokens(s->seqs[i]) - 1, s->bm.block_table(s->seqs[i]), true});
      EXPECT_EQ(s->fwd.splits_by_token(runs), s == &two) << "step " << step;
      std::span<const float> logits = s->fwd.forward(runs);
      for (size_t i = 0; i < jobs.size(); ++i) s->bm.commit(s->seqs[i]);
      if (s == &two) {
        logits_two.assign(logits.begin(), logits.end());
        continue;
      }
      ASSERT_EQ(logits.size(), logits_two.size());
      ASSERT_EQ(0, std::memcmp(logits.data(), logits_two.data(), logits.size() * sizeof(float)))
          << "step " << step << ": the split batch's logits differ in some bit";
    }
    for (size_t i = 0; i < jobs.size(); ++i)
      last[i] = argmax(std::span<const float>(logits_two).subspan(i * static_cast<size_t>(n_vocab),
                                                                   static_cast<size_t>(n_vocab)));
  }
}


// The prefill tiles (BatchForward::attention_by_tile over
// attention_rows_paged) give the logits of the per-token split
// (NEXUS_ATTENTION=per_head) bit for bit, for every KV storage: a
// 240-token prompt in one batch (eight tiles of 32 tokens times the two query
// heads of each KV head, GQA), then greedy decode steps on top of it.
TEST(BatchForward, AttentionTilesMatchThePerHeadSplitBitForBit) {
  NEXUS_REQUIRE_SHARED(path, "arch/llama-d256-F32.gguf");
  Loaded m(path);
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(240);  // the model's context is 256
  for (int32_t& t : prompt) t = std::uniform_int_distribution<int32_t>(1, m.model.config().n_vocab - 1)(rng);
  auto run = [&](KvType type, bool tiles) {
    if (!tiles) setenv("NEXUS_ATTENTION", "per_head", 1);
    LlamaContext ctx(m.model, 0, 2, type);
    unsetenv("NEXUS_ATTENTION");
    std::span<const float> logits = ctx.eval_all(prompt);
    std::vector<float> all(logits.begin(), logits.end());
    for (int32_t step = 0; step < 4; ++step) {
      const int32_t next = argmax(logits.last(static_cast<size_t>(m.model.config().n_vocab)));
      logits = ctx.eval(std::span(&next, 1));
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  setenv("NEXUS_ATTENTION", "perhead", 1);  // a typo is refused, not read as the default
  EXPECT_THROW(LlamaContext(m.model, 0, 2), Error);
  unsetenv("NEXUS_ATTENTION");
  for (KvType type : {KvType::F32, KvType::F16, KvType::Q8_0}) {
    SCOPED_TRACE(kv_type_name(type));
    const std::vector<float> tiled = run(type, true), per_head = run(type, false);
    ASSERT_EQ(tiled.size(), per_head.size());
    EXPECT_EQ(0, std::memcmp(tiled.data(), per_head.data(), tiled.size() * sizeof(float)));
  }
}
