// Scheduler policy without a model: budgets, round robin, admission order,
// priorities and the choice of preemption victims.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

#include "engine/scheduler.h"
#include "util/error.h"

using namespace nexus;

namespace {

struct Fixture {
  Fixture(int32_t n_blocks, int32_t max_seqs, int32_t budget) : blocks(n_blocks, 4), sched(blocks, max_seqs, budget) {}

  SchedSeq* add(int32_t n_prompt, int32_t priority = 0, int32_t first_token = 0) {
    auto& s = seqs.emplace_back();
    for (int32_t i = 0; i < n_prompt; ++i) s.tokens.push_back(first_token + i);
    s.priority = priority;
    s.arrival = seqs.size();
    sched.add(&s);
    return &s;
  }
  // Plans and completes a step; every completed run "samples" token 7.
  StepPlan step() {
    StepPlan p = sched.plan();
    sched.complete(p);
    for (const ScheduledRun& r : p.runs)
      if (r.completes) r.seq->tokens.push_back(7);
    blocks.validate();
    return p;
  }
  static int32_t tokens_of(const StepPlan& p, const SchedSeq* s) {
    for (const ScheduledRun& r : p.runs)
      if (r.seq == s) return r.n_tokens;
    return 0;
  }

  BlockManager blocks;
  Scheduler sched;
  std::deque<SchedSeq> seqs;  // stable addresses
};

TEST(Scheduler, BadLimitsThrow) {
  BlockManager b(4, 4);
  EXPECT_THROW(Scheduler(b, 0, 8), Error);
  EXPECT_THROW(Scheduler(b, 1, 0), Error);
}

TEST(Scheduler, LongPromptIsChunkedWhileOthersDecode) {
  Fixture f(64, 4, 8);
  SchedSeq* a = f.add(3);
  f.step();  // a: whole prompt (3 tokens)
  SchedSeq* b = f.add(30);
  StepPlan p = f.step();
  EXPECT_EQ(Fixture::tokens_of(p, a), 1);  // a decodes
  EXPECT_EQ(Fixture::tokens_of(p, b), 7);  // b's first chunk uses the rest of the budget
  EXPECT_EQ(p.n_tokens, 8);
  for (int i = 0; i < 4; ++i) {
    p = f.step();
    EXPECT_EQ(Fixture::tokens_of(p, a), 1) << "the running stream keeps decoding during b's prefill";
  }
  EXPECT_EQ(b->n_computed, 30);
}

TEST(Scheduler, BudgetSmallerThanTheRequestsServesThemAll) {
  // Running streams decode before anyone is admitted, so with a budget of 2
  // tokens per step the first two finish before the others start: slower,
  // but nobody waits forever and the budget is never exceeded.
  Fixture f(64, 8, 2);
  std::vector<SchedSeq*> s;
  for (int i = 0; i < 4; ++i) s.push_back(f.add(1));
  std::vector<int> decoded(4, 0);
  for (int step = 0; step < 40 && (!f.sched.running().empty() || !f.sched.waiting().empty()); ++step) {
    StepPlan p = f.step();
    EXPECT_LE(p.n_tokens, 2);
    for (int i = 0; i < 4; ++i) {
      if (Fixture::tokens_of(p, s[i]) == 0 || !s[i]->running()) continue;
      if (++decoded[i] == 5) f.sched.remove(s[i]);  // finishes after 5 tokens
    }
  }
  EXPECT_EQ(decoded, std::vector<int>(4, 5));
}

TEST(Scheduler, HigherPriorityIsAdmittedFirst) {
  Fixture f(64, 1, 64);
  SchedSeq* low = f.add(2, -5);
  SchedSeq* high = f.add(2, 5);
  StepPlan p = f.step();
  EXPECT_TRUE(high->running());
  EXPECT_FALSE(low->running());
  ASSERT_EQ(p.admitted.size(), 1u);
  EXPECT_EQ(p.admitted[0], high);
}

TEST(Scheduler, HigherPriorityPreemptsTheLowestMostRecentlyStarted) {
  Fixture f(64, 3, 64);
  SchedSeq* a = f.add(2, 0);
  f.step();
  SchedSeq* b = f.add(2, -1);
  f.step();
  SchedSeq* c = f.add(2, -1);
  f.step();  // running: a(0), b(-1), c(-1, started last)
  SchedSeq* urgent = f.add(2, 3);
  StepPlan p = f.step();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], c);
  EXPECT_TRUE(urgent->running());
  EXPECT_TRUE(a->running());
  EXPECT_TRUE(b->running());
  EXPECT_EQ(c->n_computed, 0);
  EXPECT_EQ(f.sched.preemptions(), 1);
}

TEST(Scheduler, EqualPriorityDoesNotPreempt) {
  Fixture f(64, 1, 64);
  SchedSeq* a = f.add(2);
  f.step();
  SchedSeq* b = f.add(2);
  StepPlan p = f.step();
  EXPECT_TRUE(p.preempted.empty());
  EXPECT_TRUE(a->running());
  EXPECT_FALSE(b->running());
}

TEST(Scheduler, OutOfBlocksPreemptsAndTheVictimResumesLater) {
  // 4 blocks of 4 tokens; two sequences of 7 prompt tokens each need 2
  // blocks, and a third block as soon as they pass 8 tokens.
  Fixture f(4, 4, 64);
  SchedSeq* a = f.add(7, 0, 0);
  SchedSeq* b = f.add(7, 0, 100);
  f.step();  // both prefilled: 4 blocks in use
  EXPECT_EQ(f.blocks.n_free(), 0);
  f.step();  // both decode token 8 (still within 2 blocks)
  StepPlan p = f.step();  // token 9 needs a third block each: b (started last) yields
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b);
  EXPECT_TRUE(a->running());
  EXPECT_FALSE(b->running());
  // b is not readmitted in the step that preempted it, and comes back once a finishes.
  const size_t b_tokens = b->tokens.size();
  f.sched.remove(a);
  p = f.step();
  EXPECT_TRUE(b->running());
  // b's first block came back from the prefix cache; its second (released
  // first, so least recently used) was evicted for a's third block.
  EXPECT_EQ(b_tokens, 9u);
  EXPECT_EQ(Fixture::tokens_of(p, b), 5) << "b re-prefills only what the prefix cache does not hold";
}

TEST(Scheduler, AdmissionDoesNotOvertakeABlockedRequest) {
  Fixture f(4, 8, 64);
  SchedSeq* a = f.add(9);   // 3 blocks
  f.step();
  SchedSeq* big = f.add(8, 0, 100);  // needs 2 blocks, 1 free
  SchedSeq* small = f.add(1, 0, 200);  // would fit, but waits behind big
  f.step();
  EXPECT_TRUE(a->running());
  EXPECT_FALSE(big->running());
  EXPECT_FALSE(small->running());
}

}  // namespace

namespace {

TEST(Scheduler, AStepThatPrefillsHigherPriorityCarriesNoLowerPriorityTokens) {
  Fixture f(64, 8, 64);
  SchedSeq* batch1 = f.add(2, -10);
  SchedSeq* batch2 = f.add(2, -10, 50);
  f.step();
  f.step();  // both decoding
  SchedSeq* inter = f.add(5, 10, 100);
  StepPlan p = f.step();
  EXPECT_EQ(Fixture::tokens_of(p, inter), 5);
  EXPECT_EQ(Fixture::tokens_of(p, batch1), 0) << "batch decodes wait one step";
  EXPECT_EQ(Fixture::tokens_of(p, batch2), 0);
  EXPECT_TRUE(p.preempted.empty());
  p = f.step();  // the interactive one decodes now: everybody runs again
  EXPECT_EQ(Fixture::tokens_of(p, inter), 1);
  EXPECT_EQ(Fixture::tokens_of(p, batch1), 1);
  EXPECT_EQ(Fixture::tokens_of(p, batch2), 1);
}

}  // namespace
