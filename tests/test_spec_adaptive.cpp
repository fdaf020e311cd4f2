// The adaptive rules of speculative decoding alone (engine/spec/step_cost.h,
// engine/spec/draft_veto.h; docs/speculative.md "Adaptive"): measured step
// costs and an acceptance rate give the draft length that makes the step
// fastest, a proposer's own cost counts against its tokens, verify steps are
// timed apart from plain ones, probes take a small share of the time, and
// a draft model whose steps turn out slower is vetoed. Fed with made-up
// timings: nothing here depends on this machine's speed.
#include <gtest/gtest.h>

#include <cstdint>

#include "engine/spec/draft_veto.h"
#include "engine/spec/step_cost.h"

using namespace nexus;

namespace {

// The adaptive draft length (engine/spec/step_cost.h): measured step costs
// and an acceptance rate give the k that makes the step fastest.
TEST(SpecStepCost, TheDraftLengthIsTheOneThatMakesTheStepFastest) {
  spec::StepCosts cost;
  EXPECT_EQ(cost.plain.seconds(4), 0);
  EXPECT_EQ(spec::best_draft_length(0.9, 1, 5, cost), 0);  // the step without a draft first
  {
    spec::StepCosts only_drafts;  // every step carried a draft: one-token steps never measured
    for (int i = 0; i < 3; ++i) {
      only_drafts.record(1, 2, 0.020, /*verifies=*/true);
      only_drafts.record(1, 3, 0.030, /*verifies=*/true);
    }
    EXPECT_FALSE(only_drafts.plain.measured(1));
    EXPECT_EQ(spec::best_draft_length(0.9, 1, 5, only_drafts), 0);
    only_drafts.record(1, 1, 0.010, false);  // the first of a size: not counted
    EXPECT_EQ(spec::best_draft_length(0.9, 1, 5, only_drafts), 0);
    only_drafts.record(1, 1, 0.010, false);
    EXPECT_TRUE(only_drafts.plain.measured(1));
    // Now measured against: drafts that double or triple the step never pay.
    EXPECT_EQ(spec::best_draft_length(0.9, 1, 2, only_drafts), 0);
  }
  // A step of n tokens: 10 ms + 2 ms per token beyond the first.
  for (int32_t n : {1, 2, 4, 8, 16}) {
    cost.plain.record(n, 0.100);  // the first step of a size: not counted
    cost.plain.record(n, 0.010 + 0.002 * (n - 1));
  }
  EXPECT_NEAR(cost.plain.seconds(3), 0.014, 1e-12);   // interpolated
  EXPECT_NEAR(cost.plain.seconds(10), 0.028, 1e-12);
  EXPECT_NEAR(cost.plain.seconds(20), 0.044, 1e-12);  // past 16: + 10% of the one-token step per token
  // High acceptance: the longest draft; none at all when it would not pay.
  EXPECT_EQ(spec::best_draft_length(0.95, 1, 5, cost), 5);
  EXPECT_EQ(spec::best_draft_length(0.1, 1, 5, cost), 0);
  // In between, the rate (n - 1 + E(q, k)) / cost(n + k) decides: with
  // q = 0.5, k = 1 gives 1.5 / 12 ms, k = 2 gives 1.75 / 14 ms (both 125 /
  // s), k = 3 1.875 / 16 ms: k = 1 is the first best.
  EXPECT_EQ(spec::best_draft_length(0.5, 1, 5, cost), 1);
  // With 8 sequences in the step a draft token costs the same 2 ms but adds
  // a smaller share: q = 0.5 no longer pays.
  EXPECT_EQ(spec::best_draft_length(0.5, 8, 5, cost), 0);
  // One slow step moves the average by at most 10% (it counts as 1.5x the
  // average), and the average follows the newest steps.
  cost.plain.record(1, 1.0);
  EXPECT_NEAR(cost.plain.seconds(1), 0.011, 1e-12);
  for (int i = 0; i < 80; ++i) cost.plain.record(1, 0.020);
  EXPECT_NEAR(cost.plain.seconds(1), 0.020, 1e-6);
}

// A draft model's own cost per proposed token (timed apart from the step)
// counts against what its tokens save; an untimed one is tried at one token.
TEST(SpecStepCost, AProposersOwnCostCountsAgainstItsTokens) {
  spec::StepCosts cost;
  for (int32_t n : {1, 2, 4, 8}) {  // 10 ms + 2 ms per token beyond the first
    cost.plain.record(n, 0.100);
    cost.plain.record(n, 0.010 + 0.002 * (n - 1));
  }
  EXPECT_EQ(spec::best_draft_length(0.95, 1, 5, cost), 5);  // a lookup: free
  EXPECT_EQ(spec::best_draft_length(0.95, 1, 5, cost, {.token_s = 0.001}), 5);  // a cheap draft still pays
  // A draft pass as dear as the step: not even drafts always accepted pay
  // (2 tokens in 22 ms at k = 1, 6 in 70 ms at k = 5), so no acceptance a
  // probe could measure would change that.
  EXPECT_EQ(spec::best_draft_length(1.0, 1, 5, cost, {.token_s = 0.010}), 0);
  EXPECT_EQ(spec::best_draft_length(0.95, 1, 5, cost, {.known = false}), 1);  // not yet timed: one token
  EXPECT_EQ(spec::best_draft_length(0.95, 1, 0, cost, {.known = false}), 0);
  // Its probes come as far apart as its cost makes them: a one-token draft
  // adds 2 ms to the step and 9.9 ms of draft: 3% of a 10 ms step if made
  // every 40 steps (39.7, rounded up).
  EXPECT_EQ(spec::probe_interval(1, cost, {.token_s = 0.0099}), 40);
  // Catching up on the tokens missed takes its share of each step too: 0.1
  // ms a token leaves 0.2 ms of the 0.3 ms budget per step, so every 60.
  EXPECT_EQ(spec::probe_interval(1, cost, {.token_s = 0.0099, .catch_up_s = 0.0001}), 60);
  // A catch-up of 3% of the step alone: no interval keeps probes within
  // that share, so a sequence that turned the draft off never probes it.
  EXPECT_EQ(spec::probe_interval(1, cost, {.token_s = 0.0099, .catch_up_s = 0.0003}), spec::kNeverProbe);
  EXPECT_EQ(spec::probe_interval(1, cost, {.known = false}), spec::kMinProbeSteps);
  // A StepCost that counts the first step of a size (DraftModel's: it paid
  // the one-off costs in its warm-up).
  spec::StepCost warmed(/*count_first=*/true);
  warmed.record(3, 0.005);
  EXPECT_TRUE(warmed.measured(3));
  EXPECT_EQ(warmed.seconds(1), 0.005);  // below the smallest measured: its cost
}

// Verify steps are timed apart from plain steps of the same size: they ran
// dearer (after a draft model's passes), and in one table made the plain
// step of several streams look dearer than a verify step one token larger.
TEST(SpecStepCost, VerifyStepsAreTimedApart) {
  spec::StepCosts cost;
  auto measure = [&](int32_t runs, int32_t n, double seconds, bool verifies) {
    for (int i = 0; i < 2; ++i) cost.record(runs, n, seconds, verifies);  // the first of a size is not counted
  };
  measure(1, 1, 0.000430, false);
  measure(4, 4, 0.000600, false);  // 4 streams decoding
  measure(1, 4, 0.000480, true);   // one stream verifying 3 draft tokens
  measure(4, 5, 0.000632, true);   // 4 streams, one verifying 1
  EXPECT_DOUBLE_EQ(cost.plain.seconds(4), 0.000600);
  EXPECT_DOUBLE_EQ(cost.with_verify(1, 4), 0.000480);
  EXPECT_DOUBLE_EQ(cost.with_verify(4, 5), 0.000632);
  EXPECT_DOUBLE_EQ(cost.with_verify(2, 4), cost.plain.seconds(4));  // not measured with 2 runs
  // 4 streams, a draft model charging 0.139 ms a token, acceptance 0.75:
  // (3 + 1.75) / (0.632 + 0.139) ms is below 4 / 0.6 ms.
  EXPECT_EQ(spec::best_draft_length(0.75, 4, 5, cost, {.token_s = 0.000139}), 0);
  // A verify step measured cheaper than the plain step without it (noise)
  // counts as the plain step: with q = 0.3 a free draft gives 4.3 tokens in
  // 0.6 ms, not enough; at 0.5 ms it would have looked worth it.
  for (int i = 0; i < 40; ++i) cost.record(4, 5, 0.000500, true);
  EXPECT_EQ(spec::best_draft_length(0.3, 4, 1, cost), 0);
}

// The drafted steps at a count are held against the plain steps there,
// summed over a window: a rate below plain's by more than 1/sqrt(n) after
// n >= kMinJudgeSteps drafted steps vetoes the draft for kVetoSteps steps.
TEST(SpecDraftVeto, VetoesTheDraftWhereItsStepsAreSlower) {
  using V = spec::DraftVeto;
  spec::DraftVeto veto;
  auto steps = [&](int32_t n, bool drafted, int32_t emitted, double seconds, int32_t count) {
    for (int32_t i = 0; i < count; ++i) veto.record(n, drafted, emitted, seconds);
  };
  steps(2, false, 4, 0.0010, V::kMinPlainSteps);  // 4000 tokens/s plain
  // 2000 tokens/s drafted: half as fast, judged from kMinJudgeSteps on.
  steps(2, true, 2, 0.0010, V::kMinJudgeSteps - 1);
  EXPECT_FALSE(veto.vetoed(2));
  steps(2, true, 2, 0.0010, 1);
  EXPECT_FALSE(veto.vetoed(1));  // by count: 1 is not 2
  for (int32_t i = 0; i < V::kVetoSteps; ++i) EXPECT_TRUE(veto.vetoed(2)) << i;
  EXPECT_FALSE(veto.vetoed(2));  // judged again on a new window
  // 15% slower (3400 tokens/s): within the noise allowed for up to 44
  // steps (1/sqrt(44) = 15.08%), over it at 45 (14.9%).
  steps(2, true, 34, 0.0100, 44);
  EXPECT_FALSE(veto.vetoed(2));
  steps(2, true, 34, 0.0100, 1);
  EXPECT_TRUE(veto.vetoed(2));
}

// With no plain steps at a count to judge by, the draft is vetoed there,
// after kMinJudgeSteps drafted steps, for the kMinPlainSteps steps needed
// to measure them; the window kept is judged at the next drafted step.
TEST(SpecDraftVeto, MeasuresPlainStepsBeforeJudging) {
  using V = spec::DraftVeto;
  spec::DraftVeto veto;
  auto steps = [&](bool drafted, int32_t emitted, int32_t count) {
    for (int32_t i = 0; i < count; ++i) veto.record(2, drafted, emitted, 0.001);
  };
  steps(true, 1, V::kMinJudgeSteps - 1);  // 1000 tokens/s drafted
  EXPECT_FALSE(veto.vetoed(2));
  steps(true, 1, 1);
  for (int32_t i = 0; i < V::kMinPlainSteps; ++i) EXPECT_TRUE(veto.vetoed(2)) << i;
  EXPECT_FALSE(veto.vetoed(2));
  steps(false, 4, V::kMinPlainSteps);  // 4000 tokens/s plain
  steps(true, 1, 1);                   // the kept window is judged: vetoed
  for (int32_t i = 0; i < V::kVetoSteps; ++i) EXPECT_TRUE(veto.vetoed(2)) << i;
  EXPECT_FALSE(veto.vetoed(2));
}

// A window without a veto starts anew; one slow step in it does not veto.
TEST(SpecDraftVeto, AWindowThatPaysIsNotVetoed) {
  using V = spec::DraftVeto;
  spec::DraftVeto veto;
  for (int32_t i = 0; i < V::kMinPlainSteps; ++i) veto.record(1, false, 1, 0.0005);  // 2000 tokens/s
  veto.record(1, true, 1, 0.0020);  // one step at 500 tokens/s
  for (int32_t i = 1; i < V::kMaxJudgeSteps; ++i) veto.record(1, true, 2, 0.0009);  // 2222
  EXPECT_FALSE(veto.vetoed(1));
  // The next window starts empty: a slow start is judged on its own steps.
  for (int32_t i = 0; i < V::kMinJudgeSteps; ++i) veto.record(1, true, 1, 0.0010);  // 1000
  EXPECT_TRUE(veto.vetoed(1));
}

// A draft found slower each time it is judged again is vetoed twice as long
// each time, up to kMaxVetoSteps; a window that pays starts that over.
TEST(SpecDraftVeto, EachVetoInARowLastsTwiceAsLong) {
  using V = spec::DraftVeto;
  spec::DraftVeto veto;
  for (int32_t i = 0; i < V::kMinPlainSteps; ++i) veto.record(4, false, 4, 0.001);  // 4000 tokens/s
  auto vetoed_steps = [&] {
    int32_t n = 0;
    while (veto.vetoed(4)) ++n;
    return n;
  };
  auto window = [&](int32_t emitted, int32_t count) {  // drafted steps of 1 ms
    for (int32_t i = 0; i < count; ++i) veto.record(4, true, emitted, 0.001);
  };
  int32_t expected = V::kVetoSteps;
  for (int round = 0; round < 7; ++round) {
    window(2, V::kMinJudgeSteps);  // 2000 tokens/s: half as fast
    EXPECT_EQ(vetoed_steps(), expected) << round;
    expected = std::min(2 * expected, V::kMaxVetoSteps);
  }
  EXPECT_EQ(expected, V::kMaxVetoSteps);
  window(5, V::kMaxJudgeSteps);  // 5000 tokens/s: pays
  EXPECT_EQ(vetoed_steps(), 0);
  window(2, V::kMinJudgeSteps);  // slower again: a short veto
  EXPECT_EQ(vetoed_steps(), V::kVetoSteps);
}

// The draft model is judged at the most sequences that ran in the last
// kWindow steps: a dip between requests keeps the count it dipped from.
TEST(SpecLoadPeak, KeepsTheMostRunningOverTheWindow) {
  spec::LoadPeak load;
  EXPECT_EQ(load.step(2), 2);
  EXPECT_EQ(load.step(3), 3);
  for (int32_t i = 0; i < spec::LoadPeak::kWindow; ++i) EXPECT_EQ(load.step(1), 3) << i;
  EXPECT_EQ(load.step(1), 1);  // alone for longer than the window: 1 it is
  EXPECT_EQ(load.step(0), 1);
  EXPECT_EQ(load.step(2), 2);  // a rise counts at once
  for (int32_t i = 0; i < spec::LoadPeak::kWindow - 1; ++i) EXPECT_EQ(load.step(1), 2) << i;
  EXPECT_EQ(load.step(2), 2);  // back before the window ended: it starts again
  for (int32_t i = 0; i < spec::LoadPeak::kWindow; ++i) EXPECT_EQ(load.step(1), 2) << i;
  EXPECT_EQ(load.step(1), 1);
}

// How often a sequence whose drafts do not pay probes with one token: at
// most kProbeShare of the time goes to probes, however dear a probe is.
TEST(SpecStepCost, ProbesCostASmallShareOfTheTime) {
  spec::StepCosts cost;
  EXPECT_EQ(spec::probe_interval(1, cost), spec::kMinProbeSteps);  // nothing measured
  auto measure = [&](int32_t runs, int32_t n, double seconds, bool verifies) {
    for (int i = 0; i < 2; ++i) cost.record(runs, n, seconds, verifies);  // the first of a size is not counted
  };
  measure(1, 1, 0.010, false);
  EXPECT_EQ(spec::probe_interval(1, cost), spec::kMinProbeSteps);  // the probe's size guessed cheap
  measure(1, 2, 0.0101, true);  // a cheap probe (prompt lookup): the least interval
  EXPECT_EQ(spec::probe_interval(1, cost), spec::kMinProbeSteps);
  // With 2 running: a probe adding 9.5 x the share of a step is made every 10.
  measure(2, 2, 0.0101, false);
  measure(2, 3, 0.0101 * (1 + 9.5 * spec::kProbeShare), true);
  EXPECT_EQ(spec::probe_interval(2, cost), 10);
  // With 3 (cost(3) estimated from the plain steps of 2): probes 100 plain
  // steps dear (2 sequences probing at once) are capped.
  measure(3, 4, 1.0, true);
  EXPECT_EQ(spec::probe_interval(3, cost), spec::kMaxProbeSteps);
}

}  // namespace
