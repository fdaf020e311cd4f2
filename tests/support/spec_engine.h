// Helpers of the speculative-decoding engine tests (test_engine_spec.cpp,
// test_engine_spec_draft.cpp): greedy and seeded requests on the shared
// F32 models, a run to completion, the plain (non-speculative) reference,
// and the checks every such test makes (usage counts by the alignment rule
// of engine/spec/prediction.h, no KV left behind).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "support/event_collector.h"
#include "support/loaded_model.h"
#include "support/requests.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace nexus::test::spec_engine {

using test::greedy;  // support/requests.h

using Loaded = LoadedModel;
using Result = EventCollector;

// The alignment rule of engine/spec/prediction.h, written again from its
// text: prediction tokens the output matched.
inline int32_t reference_accepted(const std::vector<int32_t>& p, const std::vector<int32_t>& out) {
  size_t pos = 0, counted = 0;  // counted: output tokens up to the last one counted
  bool aligned = true;
  int32_t accepted = 0;
  for (size_t n = 1; n <= out.size(); ++n) {
    if (aligned && pos < p.size() && p[pos] == out[n - 1]) {
      ++pos;
      ++accepted;
      counted = n;
      continue;
    }
    aligned = false;
    const size_t m = 3;  // a realignment needs 3 output tokens
    if (n < m) continue;
    for (size_t j = pos + m; j <= p.size(); ++j) {
      const auto tail = out.begin() + static_cast<std::ptrdiff_t>(n - m);
      if (std::equal(tail, tail + static_cast<std::ptrdiff_t>(m), p.begin() + static_cast<std::ptrdiff_t>(j - m))) {
        pos = j;
        accepted += static_cast<int32_t>(std::min(m, n - counted));  // an output token counts once
        counted = n;
        aligned = true;
        break;
      }
    }
  }
  return accepted;
}

inline EngineOptions opts(SpecProposer proposer = SpecProposer::None) {
  EngineOptions o;
  o.n_threads = 2;
  o.n_ctx = 128;  // TinyLLama-v0 was trained on 128
  o.validate_kv = true;
  o.spec.proposer = proposer;
  o.spec.max_seqs = 16;  // speculate however many run: the tests want verify runs in big batches
  o.spec.adaptive = false;  // and every draft proposed, whatever the step costs measure
  return o;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  GenerationEvent final_event;
};

inline std::vector<Outcome> run_all(Engine& e, const std::vector<GenerationRequest>& reqs) {
  std::vector<std::shared_ptr<Result>> results;
  for (const GenerationRequest& r : reqs) {
    auto res = std::make_shared<Result>();
    EXPECT_NE(e.submit(r, nexus::test::into(res)), nullptr);
    results.push_back(res);
  }
  std::vector<Outcome> out;
  for (auto& r : results) {
    EXPECT_TRUE(r->wait()) << "a request never finished";
    EXPECT_EQ(r->finals, 1);
    EXPECT_NE(r->final_event.finish, FinishReason::Error) << r->final_event.error;
    out.push_back({r->tokens, r->text, r->final_event});
  }
  return out;
}

// Stats are published after each step, the final events go out inside it:
// waits (bounded, for hangs only) until the engine has published an idle state.
inline EngineStats idle_stats(const Engine& e) {
  for (int i = 0; i < 2000; ++i) {
    const EngineStats s = e.stats();
    if (s.running == 0 && s.waiting == 0) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return e.stats();
}

inline std::vector<std::vector<int32_t>> tokens_of(const std::vector<Outcome>& v) {
  std::vector<std::vector<int32_t>> out;
  for (const Outcome& o : v) out.push_back(o.tokens);
  return out;
}

// Each request alone on an engine without speculation (and no prediction).
inline std::vector<Outcome> reference(const Loaded& m, std::vector<GenerationRequest> reqs) {
  std::vector<Outcome> out;
  for (GenerationRequest& r : reqs) {
    r.prediction.clear();
    EngineOptions o = opts();
    o.max_seqs = 1;
    Engine e(m.model, *m.tok, o);
    out.push_back(run_all(e, {r})[0]);
  }
  return out;
}

// Prompts: two that repeat themselves (n-gram lookup finds them), two that
// do not, of different lengths.
inline std::vector<GenerationRequest> base_requests(const Tokenizer& tok) {
  const std::string story = "Once upon a time, there was a little girl named Lily. She loved to play in the park. ";
  std::vector<GenerationRequest> reqs;
  reqs.push_back(greedy(tok.encode(story + story + "Once upon a time", true), 40));
  reqs.push_back(greedy(tok.encode("Lily and Max", true), 36));
  reqs.push_back(greedy(tok.encode(story + "One day, " + story + "One", true), 44));
  reqs.push_back(greedy(tok.encode("The sky was blue and the sun was hot.", true), 30));
  return reqs;
}

// Every 7th token changed, one dropped and two inserted: the shape of an edit.
inline std::vector<int32_t> mutated(std::vector<int32_t> p, int32_t n_vocab) {
  for (size_t i = 3; i < p.size(); i += 7) p[i] = (p[i] + 17) % n_vocab;
  if (p.size() > 20) {
    p.erase(p.begin() + 12);
    p.insert(p.begin() + 18, {5, 6});
  }
  return p;
}

inline std::vector<int32_t> garbage(size_t n, int32_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (int32_t& id : p) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  return p;
}

inline void expect_usage_matches(const std::vector<GenerationRequest>& reqs, const std::vector<Outcome>& got) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Usage& u = got[i].final_event.usage;
    const int32_t want = reference_accepted(reqs[i].prediction, got[i].tokens);
    EXPECT_EQ(u.accepted_prediction_tokens, want) << "request " << i;
    EXPECT_EQ(u.rejected_prediction_tokens, static_cast<int32_t>(reqs[i].prediction.size()) - want) << "request " << i;
  }
}

// No KV left behind: neither the model's blocks nor the draft's.
inline void expect_no_kv_held(const EngineStats& s, const std::string& what) {
  EXPECT_EQ(s.kv_blocks_used, 0) << what;
  EXPECT_EQ(s.draft_kv_blocks_used, 0) << what;
  EXPECT_EQ(s.draft_sequences, 0) << what;
  EXPECT_EQ(s.running, 0) << what;
}

#define LOAD_STORIES(var)                               \
  NEXUS_REQUIRE_SHARED(var##_path, "stories260K.gguf"); \
  nexus::test::spec_engine::Loaded& var = nexus::test::loaded_model(var##_path)

// Seeded sampling draws the same tokens with and without speculation (the
// acceptance rule consumes exactly the random numbers a plain run does), so
// the distribution is the target's for every seed, not only on average.
// Twelve seeded requests (temperatures, top_p, a repeat penalty); with
// `prediction_every` > 0, every such one carries the greedy output as its
// prediction (close to what a low temperature draws).
inline std::vector<GenerationRequest> seeded_requests(const Loaded& m, uint64_t prediction_every) {
  const std::vector<GenerationRequest> base = base_requests(*m.tok);
  const auto greedy_ref = tokens_of(reference(m, base));
  std::vector<GenerationRequest> reqs;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    GenerationRequest r = base[seed % base.size()];
    r.sampling.temperature = seed % 3 == 0 ? 1.0f : 0.7f;
    r.sampling.top_p = seed % 2 == 0 ? 0.9f : 1.0f;
    r.sampling.repeat_penalty = seed % 4 == 0 ? 1.2f : 1.0f;
    r.sampling.seed = seed;
    if (prediction_every > 0 && seed % prediction_every == 0) r.prediction = greedy_ref[seed % base.size()];
    reqs.push_back(r);
  }
  return reqs;
}

}  // namespace nexus::test::spec_engine
