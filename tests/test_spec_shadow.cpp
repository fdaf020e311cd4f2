// N-gram lookup's shadow (Sequence::shadow_ngram, on_plain_token): where
// lookup's drafts did not pay, its guess for the next token is still checked
// against the sampled one, so its measured acceptance follows the text
// without a verify run. Made-up step costs (10 ms + 2 ms per token), the
// stories260K tokenizer, token ids that repeat.
#include <gtest/gtest.h>

#include <vector>

#include "engine/engine.h"
#include "engine/sequence.h"
#include "engine/spec/ngram.h"
#include "engine/spec/step_cost.h"
#include "support/loaded_model.h"
#include "support/test_support.h"

namespace nexus {
namespace {

spec::StepCosts made_up_costs() {
  spec::StepCosts cost;
  for (int32_t n : {1, 2, 4, 8}) {
    cost.plain.record(n, 0.100);  // the first step of a size: not counted
    cost.plain.record(n, 0.010 + 0.002 * (n - 1));
  }
  return cost;
}

TEST(SpecShadow, LookupsAcceptanceFollowsTheTextWithoutVerifyRuns) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  const test::LoadedModel& m = test::loaded_model(path);
  GenerationJob job;
  job.req.prompt = {1, 10, 11, 12, 10, 11, 12, 10, 11};  // lookup guesses 12, 10, 11, ...
  job.req.stop.max_tokens = 64;
  Sequence s(std::move(job), *m.tok, m.tok->n_vocab(), 1, nullptr);
  SpecOptions opts;
  opts.proposer = SpecProposer::Ngram;
  const spec::StepCosts cost = made_up_costs();
  auto draft_length = [&] { return s.draft_length(DraftSource::Ngram, 5, 1, cost, {}); };
  const std::vector<int32_t> cycle = {12, 10, 11};

  // Three verify runs reject lookup's whole draft: its drafts no longer pay.
  for (int i = 0; i < 3; ++i) {
    const size_t base = s.tokens.size();
    ASSERT_EQ(s.propose(DraftSource::Ngram, opts, 3), 3);
    s.on_verified(3, 0);
    s.n_draft = 0;
    s.tokens.resize(base);
  }
  EXPECT_EQ(draft_length(), 0);

  // Plain steps whose tokens lookup guessed: drafts of several tokens pay
  // again, with no verify run (a probe would propose 1).
  for (size_t i = 0; i < 4; ++i) {
    s.shadow_ngram(opts);
    s.on_plain_token(cycle[i % 3]);
    s.tokens.push_back(cycle[i % 3]);
  }
  EXPECT_GT(draft_length(), 1);

  // Plain steps it guessed wrong (another token of the cycle, so it keeps
  // finding something to guess): none again.
  std::vector<int32_t> guess;
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(spec::ngram_propose(s.tokens, opts.ngram, 1, guess), 1);
    const int32_t other = guess[0] == 10 ? 11 : 10;
    s.shadow_ngram(opts);
    s.on_plain_token(other);
    s.tokens.push_back(other);
  }
  EXPECT_EQ(draft_length(), 0);

  // A guess counts only for the position it was made for: here each
  // position is filled (as by a verify run) before the plain token comes.
  s.tokens.insert(s.tokens.end(), {10, 11, 12, 10, 11});
  for (size_t i = 0; i < 4; ++i) {
    s.shadow_ngram(opts);
    s.tokens.push_back(cycle[i % 3]);
    s.on_plain_token(cycle[i % 3]);  // the right guess, one position late
  }
  EXPECT_EQ(draft_length(), 0);
}

}  // namespace
}  // namespace nexus
