// Speculative decoding (engine.h SpecOptions): the proposers alone, then the
// engine on the real F32 models, where every output must equal the
// non-speculative one token for token -- n-gram lookup, a draft model (the
// model itself, a quantized copy, a random-weight model of the same
// vocabulary), a prediction equal to the true continuation, a mutated one and
// garbage; alone, 8 at once with chunked prefill and with preemption; greedy
// and seeded sampling; stops in the middle of an accepted draft (the draft
// model's own tests: test_engine_spec_draft.cpp; the helpers:
// support/spec_engine.h). The block manager's invariants are checked
// after every step (EngineOptions::validate_kv), no block stays used, the
// prefix cache never serves a rejected token, and usage's prediction counts
// equal the alignment rule (engine/spec/prediction.h) recomputed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <ostream>
#include <thread>
#include <random>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine.h"
#include "engine/spec/draft_model.h"
#include "engine/spec/ngram.h"
#include "engine/spec/prediction.h"
#include "gguf/gguf_file.h"
#include "kernels/thread_pool.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "support/event_collector.h"
#include "support/gguf_writer.h"
#include "support/loaded_model.h"
#include "support/spec_engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace nexus;

namespace {

using namespace nexus::test::spec_engine;

// ---- the proposers alone ----

TEST(SpecNgram, ProposesWhatFollowedTheMostRecentLongestMatch) {
  std::vector<int32_t> out;
  // Last 3 = [4, 1, 2] occurs nowhere earlier; last 2 = [1, 2] at 0.
  EXPECT_EQ(spec::ngram_propose(std::vector<int32_t>{1, 2, 3, 4, 1, 2}, 3, 3, out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4, 1}));
  // The most recent [1, 2] (at 3) wins over the one at 0.
  EXPECT_EQ(spec::ngram_propose(std::vector<int32_t>{1, 2, 9, 1, 2, 7, 1, 2}, 2, 4, out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 1, 2}));
  // A longer match beats a more recent shorter one: [5, 1, 2] at 0.
  EXPECT_EQ(spec::ngram_propose(std::vector<int32_t>{5, 1, 2, 8, 1, 2, 6, 5, 1, 2}, 3, 2, out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{8, 1}));
  EXPECT_EQ(spec::ngram_propose(std::vector<int32_t>{1, 2, 3}, 3, 4, out), 0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(spec::ngram_propose(std::vector<int32_t>{7, 7}, 3, 0, out), 0);
}

TEST(SpecPrediction, FollowsTheOutputAndRealignsAfterAnEdit) {
  spec::PredictionTracker t({10, 11, 12, 13, 14, 15, 16});
  std::vector<int32_t> out, proposal;
  EXPECT_EQ(t.propose(3, proposal), 3);
  EXPECT_EQ(proposal, (std::vector<int32_t>{10, 11, 12}));
  auto emit = [&](int32_t id) {
    out.push_back(id);
    t.on_token(out);
  };
  emit(10);
  emit(11);
  EXPECT_EQ(t.accepted(), 2);
  emit(99);  // replaces 12
  EXPECT_FALSE(t.aligned());
  // Not aligned, the proposal follows the guess that 99 replaced 12.
  EXPECT_EQ(t.propose(3, proposal), 3);
  EXPECT_EQ(proposal, (std::vector<int32_t>{13, 14, 15}));
  emit(13);
  emit(14);
  EXPECT_FALSE(t.aligned());  // [11, 99, 13], [99, 13, 14]: not in the prediction
  EXPECT_EQ(t.propose(3, proposal), 2);
  EXPECT_EQ(proposal, (std::vector<int32_t>{15, 16}));
  emit(15);                   // [13, 14, 15] is: aligned at 16
  EXPECT_TRUE(t.aligned());
  EXPECT_EQ(t.accepted(), 5);
  EXPECT_EQ(t.propose(3, proposal), 1);
  EXPECT_EQ(proposal, (std::vector<int32_t>{16}));
  emit(16);
  EXPECT_EQ(t.accepted(), 6);
  EXPECT_EQ(t.rejected(), 1);
  emit(17);  // past the end
  EXPECT_FALSE(t.aligned());
  EXPECT_EQ(t.accepted(), 6);
}

// The alignment follows the output through other edits too: a token of P
// skipped, a token replaced further on.
TEST(SpecPrediction, ProposalsFollowSkippedAndReplacedTokens) {
  spec::PredictionTracker t({10, 11, 12, 13, 14, 15, 16, 17});
  std::vector<int32_t> out, proposal;
  auto emit = [&](int32_t id) {
    out.push_back(id);
    t.on_token(out);
  };
  emit(10);
  emit(12);  // 11 skipped -- or replaced by 12: both fit, a replacement is preferred
  EXPECT_FALSE(t.aligned());
  EXPECT_EQ(t.propose(2, proposal), 2);
  EXPECT_EQ(proposal, (std::vector<int32_t>{12, 13}));
  emit(13);  // only the skip fits now
  EXPECT_EQ(t.propose(2, proposal), 2);
  EXPECT_EQ(proposal, (std::vector<int32_t>{14, 15}));
  emit(77);  // replaces 14
  emit(15);
  EXPECT_EQ(t.propose(2, proposal), 2);
  EXPECT_EQ(proposal, (std::vector<int32_t>{16, 17}));
  EXPECT_EQ(t.accepted(), 1);  // the counts are the rule's: [13, 77, 15] never realigned
}

// Rule 3 counts only output tokens not counted before: a realignment over
// the last m tokens must not count one that rule 2 matched already (found
// by the fresh-user trial: a prediction starting with a doubled token gave
// accepted_prediction_tokens = completion_tokens + 1).
TEST(SpecPrediction, ARealignmentNeverCountsAnOutputTokenTwice) {
  spec::PredictionTracker t({410, 410, 447, 500, 501});
  std::vector<int32_t> out;
  for (int32_t id : {410, 447, 500}) {
    out.push_back(id);
    t.on_token(out);
    EXPECT_LE(t.accepted(), static_cast<int32_t>(out.size()));
  }
  // 410 matched P[0]; 447 broke the alignment; [410, 447, 500] realigned at
  // P[1, 4), counting 447 and 500 only.
  EXPECT_EQ(t.accepted(), 3);
  EXPECT_EQ(t.rejected(), 2);
}

// Rule 3 realigns on 3 output tokens, never on fewer: a prediction whose
// first token is not the output's (a leading space, an edit on its first
// line) is found again from the output's third token, not at the first
// later copy of its first token.
TEST(SpecPrediction, AFirstTokenEditRealignsOnThreeTokens) {
  // The output is 5 6 7 8 9 ...; P starts with 4 instead of 5, and has a
  // 5 further on (a "," say).
  spec::PredictionTracker t({4, 6, 7, 8, 9, 10, 11, 5, 12, 13});
  std::vector<int32_t> out;
  for (int32_t id : {5, 6, 7, 8, 9, 10, 11}) {
    out.push_back(id);
    t.on_token(out);
  }
  // [5, 6, 7] is not in P; [6, 7, 8] is, at P[1, 4): 6 7 8 counted, then 9 10 11.
  EXPECT_TRUE(t.aligned());
  EXPECT_EQ(t.accepted(), 6);
  EXPECT_EQ(t.rejected(), 4);
}

// A run of one repeated token with two of P's tokens replaced inside it:
// several alignments fit the run equally well, and the proposal must still
// be at the right place when the run ends (the counting rule's 3-gram
// resync alone realigns inside the run, too far on).
TEST(SpecPrediction, ProposalsKeepTheirPlaceThroughARunOfOneToken) {
  const std::vector<int32_t> p = {1, 2, 9, 9, 50, 9, 9, 9, 51, 9, 9, 9, 3, 4, 5, 6};
  std::vector<int32_t> truth = p;
  truth[4] = truth[8] = 9;  // the output replaces 50 and 51
  spec::PredictionTracker t(p);
  std::vector<int32_t> out, proposal;
  for (size_t i = 0; i < 12; ++i) {
    out.push_back(truth[i]);
    t.on_token(out);
  }
  EXPECT_EQ(t.propose(3, proposal), 3);
  EXPECT_EQ(proposal, (std::vector<int32_t>{3, 4, 5}));
  // A prediction that does not fit at all stops proposing after two tokens.
  spec::PredictionTracker g({70, 71, 72, 73, 74, 75});
  out = {1};
  g.on_token(out);
  EXPECT_GT(g.propose(2, proposal), 0);
  out.push_back(2);
  g.on_token(out);
  EXPECT_EQ(g.propose(2, proposal), 0);
}

// The block manager under verify runs: a real token and a draft appended,
// the rejected tail truncated before commit, many times over. Invariants
// hold at every step, the kept tokens are exactly the accepted ones, no
// block stays used, and the prefix cache knows only accepted tokens.
TEST(SpecBlocks, RejectedDraftsLeaveNoBlockAndNoHash) {
  BlockManager bm(12, 4);
  const BlockManager::SeqId s = bm.create();
  std::vector<int32_t> kept;
  std::vector<std::vector<int32_t>> rejected_runs;  // kept prefix + a rejected tail, for the lookups below
  std::mt19937 rng(5);
  for (int step = 0; step < 400 && kept.size() < 36; ++step) {
    const int32_t k = static_cast<int32_t>(rng() % 6);
    std::vector<int32_t> run(static_cast<size_t>(1 + k));
    for (int32_t& t : run) t = static_cast<int32_t>(rng() % 50);
    ASSERT_TRUE(bm.append(s, run));
    const int32_t accepted = static_cast<int32_t>(rng() % static_cast<uint32_t>(k + 1));
    const int32_t keep = static_cast<int32_t>(kept.size()) + 1 + accepted;
    if (accepted < k) {
      std::vector<int32_t> with = kept;
      with.insert(with.end(), run.begin(), run.end());
      rejected_runs.push_back(with);
    }
    ASSERT_EQ(bm.truncate(s, keep), keep);
    kept.insert(kept.end(), run.begin(), run.begin() + 1 + accepted);
    bm.commit(s);
    bm.validate();
  }
  const std::span<const int32_t> have = bm.tokens(s);
  EXPECT_EQ(std::vector<int32_t>(have.begin(), have.end()), kept);
  bm.release(s);
  bm.validate();
  EXPECT_EQ(bm.n_used(), 0);
  // Each kept prefix + its rejected tail: only blocks wholly inside the kept tokens match.
  for (const std::vector<int32_t>& toks : rejected_runs) {
    const BlockManager::SeqId t = bm.create();
    const int32_t matched = bm.match_prefix(t, toks);
    int32_t common = 0;
    while (common < static_cast<int32_t>(toks.size()) && common < static_cast<int32_t>(kept.size()) &&
           toks[static_cast<size_t>(common)] == kept[static_cast<size_t>(common)])
      ++common;
    EXPECT_LE(matched, common / 4 * 4);
    bm.release(t);
  }
  bm.validate();
}

// ---- the engine ----

// A model and the proposer the engine runs it with: n-gram lookup, or a
// draft model (a file of the same vocabulary).
struct SpecCase {
  const char* model;
  const char* draft = nullptr;  // null: --spec ngram
  // What the draft's acceptance must look like: Some (0 < accepted <
  // proposed), All (the model itself: its argmax is the model's own), Any.
  enum Acceptance { Some, All, Any } acceptance = Some;
  const char* name = "";
};
void PrintTo(const SpecCase& c, std::ostream* os) { *os << c.name; }

// The engine's options for a case, its draft model loaded (null when the
// file is missing: the caller skips).
EngineOptions case_opts(const SpecCase& c) {
  if (c.draft == nullptr) return opts(SpecProposer::Ngram);
  EngineOptions o = opts();
  o.spec.draft_model = &nexus::test::loaded_model(nexus::test::shared_model_path(c.draft)).model;
  return o;
}

int64_t proposed_by(const SpecCase& c, const EngineStats& s) {
  return c.draft ? s.spec_proposed_draft : s.spec_proposed_ngram;
}
int64_t accepted_by(const SpecCase& c, const EngineStats& s) {
  return c.draft ? s.spec_accepted_draft : s.spec_accepted_ngram;
}

class SpecOnModel : public ::testing::TestWithParam<SpecCase> {};

#define REQUIRE_CASE(c)                                              \
  const SpecCase& c = GetParam();                                    \
  NEXUS_REQUIRE_SHARED(path, c.model);                               \
  if (c.draft) {                                                     \
    NEXUS_REQUIRE_SHARED(draft_path, c.draft);                       \
  }                                                                  \
  Loaded& m = nexus::test::loaded_model(path)

TEST_P(SpecOnModel, GreedyOutputIsUnchangedByEveryProposer) {
  REQUIRE_CASE(c);
  const int32_t n_vocab = m.model.config().n_vocab;
  const std::vector<GenerationRequest> base = base_requests(*m.tok);
  const std::vector<Outcome> ref = reference(m, base);
  const auto want = tokens_of(ref);

  {  // the case's proposer, one request at a time
    Engine e(m.model, *m.tok, case_opts(c));
    for (size_t i = 0; i < base.size(); ++i) EXPECT_EQ(run_all(e, {base[i]})[0].tokens, want[i]) << "request " << i;
    const EngineStats s = idle_stats(e);
    EXPECT_GT(s.spec_verify_runs, 0);
    EXPECT_GT(proposed_by(c, s), 0);
    if (c.acceptance != SpecCase::Any) {
      EXPECT_GT(accepted_by(c, s), 0) << "the repeating prompts (or a good draft) should have accepted drafts";
      EXPECT_LT(s.steps, 150) << "speculation should have saved steps (" << s.steps << ")";
    }
    if (c.acceptance == SpecCase::Some) {
      EXPECT_LT(accepted_by(c, s), proposed_by(c, s));
    }
    if (c.acceptance == SpecCase::All) {
      EXPECT_EQ(accepted_by(c, s), proposed_by(c, s)) << "the model as its own draft proposes its own argmax";
    }
    expect_no_kv_held(s, "one at a time");
  }
  // Predictions: the true continuation, a mutated one, garbage (with the
  // case's draft model too: the prediction goes first).
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<GenerationRequest> reqs = base;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (kind == 0) reqs[i].prediction = want[i];
      if (kind == 1) reqs[i].prediction = mutated(want[i], n_vocab);
      if (kind == 2) reqs[i].prediction = garbage(want[i].size(), n_vocab, static_cast<uint32_t>(i));
    }
    EngineOptions o = opts();
    if (c.draft) o = case_opts(c);
    Engine e(m.model, *m.tok, o);
    std::vector<Outcome> got;
    for (const GenerationRequest& r : reqs) got.push_back(run_all(e, {r})[0]);
    EXPECT_EQ(tokens_of(got), want) << "prediction kind " << kind;
    expect_usage_matches(reqs, got);
    const EngineStats s = idle_stats(e);
    // Garbage never lines up (the first output token is the prefill's, not proposed): no verify run then.
    if (kind < 2) {
      EXPECT_GT(s.spec_verify_runs, 0);
    }
    if (kind == 0) {
      for (size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(got[i].final_event.usage.accepted_prediction_tokens, static_cast<int32_t>(want[i].size()));
        EXPECT_EQ(got[i].final_event.usage.rejected_prediction_tokens, 0);
      }
      // Every draft token of the true continuation is the model's own choice.
      EXPECT_EQ(s.spec_accepted_prediction, s.spec_proposed_prediction);
    }
    if (kind == 1) {
      EXPECT_GT(s.spec_accepted_prediction, 0);
    }
    if (kind == 2 && c.draft) {
      EXPECT_GT(s.spec_proposed_draft, 0) << "garbage never aligns: the draft model proposes";
    }
    expect_no_kv_held(s, "prediction kind " + std::to_string(kind));
  }
}

TEST_P(SpecOnModel, EightConcurrentWithChunkedPrefillAndPreemption) {
  REQUIRE_CASE(c);
  const int32_t n_vocab = m.model.config().n_vocab;
  const std::vector<GenerationRequest> base = base_requests(*m.tok);
  // Eight: the four prompts with a prediction (true, mutated, garbage,
  // none) and without.
  std::vector<GenerationRequest> reqs = base;
  reqs.insert(reqs.end(), base.begin(), base.end());
  const auto want = tokens_of(reference(m, reqs));
  for (size_t i = 0; i < 4; ++i) {
    if (i == 0) reqs[i].prediction = want[i];
    if (i == 1) reqs[i].prediction = mutated(want[i], n_vocab);
    if (i == 2) reqs[i].prediction = garbage(want[i].size(), n_vocab, 9);
  }
  reqs[4].prediction = want[4];

  struct Config {
    const char* name;
    int32_t budget;
    int32_t pool_blocks;  // 0: the default
  };
  for (const Config& cfg : {Config{"chunked prefill", 7, 0}, Config{"preemption", 128, 10}, Config{"both", 9, 10}}) {
    EngineOptions o = case_opts(c);
    o.max_batch_tokens = cfg.budget;
    if (cfg.pool_blocks > 0)
      o.kv_memory =
          static_cast<int64_t>(KvCache::block_bytes(m.model.config(), kDefaultBlockSize, KvType::F16)) * cfg.pool_blocks;
    Engine e(m.model, *m.tok, o);
    const std::vector<Outcome> got = run_all(e, reqs);
    EXPECT_EQ(tokens_of(got), want) << cfg.name;
    expect_usage_matches(reqs, got);
    const EngineStats s = idle_stats(e);
    EXPECT_GT(s.spec_verify_runs, 0) << cfg.name;
    EXPECT_GT(s.spec_accepted_prediction + accepted_by(c, s), 0) << cfg.name;
    EXPECT_GT(proposed_by(c, s), 0) << cfg.name;
    if (cfg.pool_blocks > 0) {
      EXPECT_GT(s.preemptions, 0) << cfg.name << ": the small pool should force preemption";
    }
    expect_no_kv_held(s, cfg.name);
  }
}

INSTANTIATE_TEST_SUITE_P(F32Models, SpecOnModel,
                         ::testing::Values(SpecCase{"stories260K.gguf", nullptr, SpecCase::Some, "stories260K"},
                                           SpecCase{"TinyLLama-v0.F32.gguf", nullptr, SpecCase::Some, "TinyLLamaV0"}),
                         [](const auto& info) { return std::string(info.param.name); });
// The arch/ llama model, and gemma2 (its windowed layers' own KV pool:
// truncation of rejected tokens in both tables).
INSTANTIATE_TEST_SUITE_P(ArchModels, SpecOnModel,
                         ::testing::Values(SpecCase{"arch/llama-d256-F32.gguf", nullptr, SpecCase::Some, "llama"},
                                           SpecCase{"arch/gemma2-d64-F32.gguf", nullptr, SpecCase::Some, "gemma2"}),
                         [](const auto& info) { return std::string(info.param.name); });
// --draft-model: the model as its own draft (every draft token accepted),
// TinyLLama-v0's Q8_0 copy for its F32 model (a real draft: mostly
// accepted), and random-weight models of stories260K's vocabulary (arch/:
// mostly rejected, so the draft's KV is rolled back again and again;
// gemma2's windowed layers in the draft's own pool).
INSTANTIATE_TEST_SUITE_P(
    DraftModel, SpecOnModel,
    ::testing::Values(SpecCase{"stories260K.gguf", "stories260K.gguf", SpecCase::All, "stories260K_self"},
                      SpecCase{"TinyLLama-v0.F32.gguf", "TinyLLama-v0.F32.gguf", SpecCase::All, "TinyLLamaV0_self"},
                      SpecCase{"TinyLLama-v0.F32.gguf", "TinyLLama-v0.Q8_0.gguf", SpecCase::Any, "TinyLLamaV0_q8_0"},
                      SpecCase{"stories260K.gguf", "arch/llama-d256-F32.gguf", SpecCase::Any, "stories260K_llama"},
                      SpecCase{"stories260K.gguf", "arch/gemma2-d64-F32.gguf", SpecCase::Any, "stories260K_gemma2"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(EngineSpec, SeededSamplingIsUnchanged) {
  LOAD_STORIES(m);
  const std::vector<GenerationRequest> reqs = seeded_requests(m, 1);
  const auto want = tokens_of(reference(m, reqs));
  Engine e(m.model, *m.tok, opts(SpecProposer::Ngram));
  const std::vector<Outcome> got = run_all(e, reqs);
  EXPECT_EQ(tokens_of(got), want);
  expect_usage_matches(reqs, got);
  EXPECT_GT(idle_stats(e).spec_accepted_prediction + idle_stats(e).spec_accepted_ngram, 0);
}

// The distribution of a speculatively sampled token is the model's: at the
// second output token (the first one a verify run samples; the first comes
// from the prefill), conditioned on the first being t0, a chi-square
// goodness-of-fit test of the draws against softmax(logits) at temperature
// 1 (no filters), over the 8 likeliest tokens + the rest, at significance
// 0.001. The draft there is the likeliest token, so draws are both accepted
// and rejected. Seeds are fixed: the test is deterministic.
TEST(EngineSpec, SampledTokensFollowTheModelsDistribution) {
  LOAD_STORIES(m);
  GenerationRequest base = greedy(m.tok->encode("Lily", true), 1);
  const int32_t t0 = reference(m, {base})[0].tokens[0];
  // The exact distribution after prompt + t0: logprobs of the top 20 (no filter, temperature 1).
  GenerationRequest probe = base;
  probe.prompt.push_back(t0);
  probe.sampling.temperature = 1.0f;
  probe.sampling.logprobs = kMaxTopLogprobs;
  probe.sampling.seed = 1;
  Engine pe(m.model, *m.tok, opts());
  auto res = std::make_shared<Result>();
  ASSERT_NE(pe.submit(probe, nexus::test::into(res)), nullptr);
  ASSERT_TRUE(res->wait());
  ASSERT_FALSE(res->events.empty());
  ASSERT_TRUE(res->events[0].logprob.has_value());
  const std::vector<TokenLogprob>& top = res->events[0].logprob->top;
  ASSERT_GE(top.size(), 8u);
  constexpr size_t kBins = 8;
  std::vector<double> p(kBins + 1, 0.0);
  double covered = 0;
  for (size_t i = 0; i < kBins; ++i) covered += p[i] = std::exp(static_cast<double>(top[i].logprob));
  p[kBins] = 1.0 - covered;
  EXPECT_LT(p[0], 0.7) << "the position should have a broad distribution";

  std::vector<GenerationRequest> reqs;
  for (uint64_t seed = 1; seed <= 1500; ++seed) {
    GenerationRequest r = base;
    r.stop.max_tokens = 3;  // room for a one-token draft after the first token
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.prediction = {t0, top[0].id, top[0].id};
    reqs.push_back(r);
  }
  EngineOptions o = opts();
  o.max_seqs = 16;
  Engine e(m.model, *m.tok, o);
  std::vector<Outcome> got;
  for (size_t i = 0; i < reqs.size(); i += 16) {
    std::vector<GenerationRequest> chunk(reqs.begin() + static_cast<std::ptrdiff_t>(i),
                                         reqs.begin() + static_cast<std::ptrdiff_t>(std::min(reqs.size(), i + 16)));
    for (Outcome& x : run_all(e, chunk)) got.push_back(std::move(x));
  }
  std::vector<double> observed(kBins + 1, 0.0);
  double n = 0;
  for (const Outcome& x : got) {
    if (x.tokens.size() < 2 || x.tokens[0] != t0) continue;
    size_t bin = kBins;
    for (size_t i = 0; i < kBins; ++i)
      if (top[i].id == x.tokens[1]) bin = i;
    observed[bin] += 1;
    n += 1;
  }
  ASSERT_GT(n, 200) << "too few draws with the first token " << t0;
  double chi2 = 0;
  for (size_t i = 0; i <= kBins; ++i) {
    const double expected = n * p[i];
    ASSERT_GT(expected, 5) << "bin " << i << " is too small for the test";
    chi2 += (observed[i] - expected) * (observed[i] - expected) / expected;
  }
  constexpr double kCritical = 26.12;  // chi-square, 8 degrees of freedom, p = 0.001
  EXPECT_LT(chi2, kCritical) << "draws: " << n;
  const EngineStats s = idle_stats(e);
  EXPECT_GT(s.spec_verify_runs, 100);
  EXPECT_GT(s.spec_accepted_prediction, 0);
  EXPECT_LT(s.spec_accepted_prediction, s.spec_proposed_prediction);  // some rejected too
  // And each seed draws what it draws without speculation.
  std::vector<GenerationRequest> few(reqs.begin(), reqs.begin() + 24);
  EXPECT_EQ(tokens_of(reference(m, few)), tokens_of(std::vector<Outcome>(got.begin(), got.begin() + 24)));
}

// A stop in the middle of an accepted draft ends the output exactly where a
// plain run ends it: max_tokens, a stop string, end of generation.
TEST(EngineSpec, StopsCutAnAcceptedDraftWhereAPlainRunStops) {
  LOAD_STORIES(m);
  const std::vector<GenerationRequest> base = base_requests(*m.tok);
  const std::vector<Outcome> full = reference(m, base);
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < base.size(); ++i) {
    GenerationRequest r = base[i];
    r.prediction = full[i].tokens;
    r.stop.max_tokens = 7 + static_cast<int32_t>(i);  // inside a draft of the true continuation
    reqs.push_back(r);
    r.stop.max_tokens = base[i].stop.max_tokens;
    const std::string& text = full[i].text;
    r.stop.stop = {text.substr(text.size() / 2, 5)};  // a stop string the output reaches
    reqs.push_back(r);
    r.stop.stop.clear();
    r.stop.ignore_eos = false;  // the model's own end of generation, if it comes
    r.stop.max_tokens = 120;
    reqs.push_back(r);
  }
  const std::vector<Outcome> want = reference(m, reqs);
  Engine e(m.model, *m.tok, opts(SpecProposer::Ngram));
  const std::vector<Outcome> got = run_all(e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].text, want[i].text) << "request " << i;
    EXPECT_EQ(got[i].final_event.finish, want[i].final_event.finish) << "request " << i;
    EXPECT_EQ(got[i].final_event.usage.completion_tokens, want[i].final_event.usage.completion_tokens);
  }
  EXPECT_EQ(got[0].tokens.size(), 7u);
  EXPECT_GT(idle_stats(e).spec_accepted_prediction, 0);
}

// Rejected draft tokens never reach the prefix cache: a prompt made of the
// first prompt followed by the rejected garbage finds only the first
// prompt's full blocks cached.
TEST(EngineSpec, PrefixCacheNeverServesRejectedTokens) {
  LOAD_STORIES(m);
  const int32_t n_vocab = m.model.config().n_vocab;
  GenerationRequest a = greedy(m.tok->encode("Once upon a time, there was a little girl named Lily.", true), 40);
  const std::vector<int32_t> want = reference(m, {a})[0].tokens;
  // The true first token (the prefill's, never proposed), then garbage:
  // proposed after it and rejected from its first token on.
  std::vector<int32_t> g = garbage(64, n_vocab, 3);
  if (g[0] == want[1]) g[0] = (g[0] + 1) % n_vocab;
  g.insert(g.begin(), want[0]);
  a.prediction = g;
  EngineOptions o = opts();
  o.spec.k = 16;  // drafts that cover whole blocks
  Engine e(m.model, *m.tok, o);
  const Outcome got = run_all(e, {a})[0];
  EXPECT_EQ(got.tokens, want);
  EXPECT_GT(idle_stats(e).spec_proposed_prediction, 0);
  EXPECT_EQ(idle_stats(e).spec_accepted_prediction, 0);
  // prompt + first token + the garbage as a new prompt: only blocks wholly
  // inside the prompt and the first token may be hits.
  GenerationRequest b = greedy(a.prompt, 4);
  b.prompt.insert(b.prompt.end(), g.begin(), g.end());
  const Outcome second = run_all(e, {b})[0];
  const int32_t bs = e.stats().block_size;
  EXPECT_LE(second.final_event.usage.cached_tokens, static_cast<int32_t>(a.prompt.size() + 1) / bs * bs);
  // And the real continuation was cached as usual: prompt + output finds blocks past the prompt.
  GenerationRequest c = greedy(a.prompt, 4);
  c.prompt.insert(c.prompt.end(), want.begin(), want.end());
  const Outcome third = run_all(e, {c})[0];
  EXPECT_GT(third.final_event.usage.cached_tokens, static_cast<int32_t>(a.prompt.size()) / bs * bs);
}

TEST(EngineSpec, LogprobsRequestsDoNotSpeculate) {
  LOAD_STORIES(m);
  GenerationRequest r = base_requests(*m.tok)[0];
  r.sampling.logprobs = 2;
  const Outcome ref = reference(m, {r})[0];
  r.prediction = ref.tokens;
  Engine e(m.model, *m.tok, opts(SpecProposer::Ngram));
  const Outcome got = run_all(e, {r})[0];
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_EQ(idle_stats(e).spec_verify_runs, 0);
  // Usage still reports the prediction (it is a function of the output).
  EXPECT_EQ(got.final_event.usage.accepted_prediction_tokens, static_cast<int32_t>(ref.tokens.size()));
}

TEST(EngineSpec, BadPredictionIdsAreAnError) {
  LOAD_STORIES(m);
  GenerationRequest r = greedy(m.tok->encode("Once", true), 4);
  r.prediction = {1, m.model.config().n_vocab};
  Engine e(m.model, *m.tok, opts());
  auto res = std::make_shared<Result>();
  ASSERT_NE(e.submit(r, nexus::test::into(res)), nullptr);
  ASSERT_TRUE(res->wait());
  EXPECT_EQ(res->final_event.finish, FinishReason::Error);
  EXPECT_NE(res->final_event.error.find("prediction token"), std::string::npos) << res->final_event.error;
}

}  // namespace

// With adaptive draft lengths (the default), greedy output is still plain
// greedy output token for token: the engine only chooses how much to
// propose, never what is emitted.
TEST(EngineSpec, AdaptiveDraftLengthsKeepGreedyOutput) {
  LOAD_STORIES(m);
  const std::vector<GenerationRequest> base = base_requests(*m.tok);
  const std::vector<Outcome> want = reference(m, base);
  const int32_t n_vocab = m.model.config().n_vocab;
  EngineOptions o = opts(SpecProposer::Ngram);
  o.spec.adaptive = true;
  Engine e(m.model, *m.tok, o);
  std::vector<GenerationRequest> reqs = base;
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].prediction = mutated(want[i].tokens, n_vocab);
  const std::vector<Outcome> got = run_all(e, reqs);
  EXPECT_EQ(tokens_of(got), tokens_of(want));
  expect_usage_matches(reqs, got);
  expect_no_kv_held(idle_stats(e), "adaptive");
}
