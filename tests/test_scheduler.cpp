// Scheduler policy without a model: budgets, round robin, admission order,
// priorities, the choice of preemption victims, and aging (on a made-up clock).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>

#include "engine/scheduler.h"
#include "util/error.h"

using namespace nexus;
using namespace std::chrono_literals;

namespace {

struct Fixture {
  Fixture(int32_t n_blocks, int32_t max_seqs, int32_t budget) : blocks(n_blocks, 4), sched(blocks, max_seqs, budget) {}

  SchedSeq* add(int32_t n_prompt, int32_t priority = 0, int32_t first_token = 0) {
    auto& s = seqs.emplace_back();
    for (int32_t i = 0; i < n_prompt; ++i) s.tokens.push_back(first_token + i);
    s.priority = priority;
    s.arrival = seqs.size();
    s.waiting_since = now;
    sched.add(&s);
    return &s;
  }
  // Plans and completes a step at `now`; every completed run "samples" token 7.
  StepPlan step() {
    StepPlan p = sched.plan(now);
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
  Scheduler::Clock::time_point now{};  // made-up time: tests move it
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

namespace {

// Aging (scheduler.h): one slot, a stream of priority-10 requests that keeps
// it busy (each finishes after a few steps and another waits), and one
// default request behind them. Steps are 100 ms of made-up time.
struct Flood {
  explicit Flood(Fixture& f) : f(f) {}
  // A step; the running flood request finishes after 3 tokens, and there is
  // always one flood request waiting.
  StepPlan step() {
    while (waiting_flood() < 1) f.add(2, 10, 1000 + static_cast<int32_t>(f.seqs.size()));
    StepPlan p = f.step();
    for (SchedSeq* r : std::vector<SchedSeq*>(f.sched.running()))
      if (r->priority == 10 && r->tokens.size() >= 5) f.sched.remove(r);
    f.now += 100ms;
    return p;
  }
  int waiting_flood() const {
    return static_cast<int>(std::count_if(f.sched.waiting().begin(), f.sched.waiting().end(),
                                          [](const SchedSeq* s) { return s->priority == 10; }));
  }
  Fixture& f;
};

TEST(Scheduler, AWaitingSequenceAgesAfterMaxWaitAndGoesAheadOfAHigherPriorityFlood) {
  Fixture f(64, 1, 64);
  Flood flood(f);
  flood.step();  // a flood request runs
  SchedSeq* def = f.add(2, 0, 500);
  const auto arrived = f.now;
  while (f.now - arrived < Scheduler::kMaxWait) {
    flood.step();
    ASSERT_FALSE(def->running()) << "admitted before kMaxWait: priorities order the first 2 s of a wait";
    ASSERT_FALSE(def->aged);
  }
  // Without aging it would wait as long as the flood lasts; the first plan
  // at kMaxWait admits it, ahead of the waiting flood request.
  const StepPlan p = flood.step();
  EXPECT_TRUE(def->aged);
  EXPECT_TRUE(def->running());
  EXPECT_EQ(Fixture::tokens_of(p, def), 2);
}

TEST(Scheduler, AnAgedSequenceIsNotPreemptedBackByItsVictimNorByNewerRequests) {
  Fixture f(64, 1, 64);
  SchedSeq* high = f.add(2, 10);
  f.step();
  SchedSeq* def = f.add(2, 0, 500);
  f.now += Scheduler::kMaxWait;
  StepPlan p = f.step();
  ASSERT_TRUE(def->running());
  ASSERT_EQ(p.preempted, std::vector<SchedSeq*>{high});
  // def decodes for 10 kMaxWait: its victim ages in the meantime (equal
  // rank: no preemption), and a newer priority-10 request never preempts it.
  for (int i = 0; i < 200; ++i) {
    f.now += 100ms;
    if (i == 50) f.add(2, 10, 900);
    p = f.step();
    ASSERT_EQ(Fixture::tokens_of(p, def), 1) << "step " << i;
    ASSERT_TRUE(p.preempted.empty()) << "step " << i;
  }
  EXPECT_TRUE(high->aged);
  EXPECT_EQ(f.sched.preemptions(), 1);
  f.sched.remove(def);
  f.step();
  EXPECT_TRUE(high->running()) << "the oldest aged request is next";
}

TEST(Scheduler, AgedSequencesGoInArrivalOrderWhateverTheirPriority) {
  Fixture f(64, 1, 64);
  Flood flood(f);
  flood.step();
  SchedSeq* batch = f.add(2, -10, 500);
  SchedSeq* def = f.add(2, 0, 600);
  for (int i = 0; i < 30 && !batch->aged; ++i) flood.step();  // 3 s
  ASSERT_TRUE(batch->aged);
  EXPECT_TRUE(def->aged);
  EXPECT_TRUE(batch->running()) << "first come, first served once aged";
  EXPECT_FALSE(def->running());
  f.sched.remove(batch);
  flood.step();
  EXPECT_TRUE(def->running());
}

TEST(Scheduler, APreemptedSequenceWaitsAgainBeforeItAges) {
  // Its wait starts at its preemption, not at its submission: a sequence
  // that ran for 5 s and was then preempted does not come back aged.
  Fixture f(64, 1, 64);
  SchedSeq* a = f.add(2, 0);
  f.step();
  f.now += 5s;
  SchedSeq* urgent = f.add(2, 10, 100);
  StepPlan p = f.step();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], a);
  f.now += Scheduler::kMaxWait - 1ms;
  f.step();
  EXPECT_FALSE(a->aged);
  EXPECT_TRUE(urgent->running());
  f.now += 1ms;
  p = f.step();
  EXPECT_TRUE(a->aged);
  EXPECT_TRUE(a->running());
  EXPECT_FALSE(urgent->running()) << "the aged sequence takes the slot back";
}

TEST(Scheduler, AnAgedSequencePreemptsForBlocksToo) {
  // 4 blocks of 4 tokens, all held by a priority-10 sequence (14 prompt
  // tokens: room for two decodes without a fifth block); an aged default
  // one needing 2 blocks preempts it.
  Fixture f(4, 8, 64);
  SchedSeq* big = f.add(14, 10, 0);
  f.step();
  ASSERT_EQ(f.blocks.n_free(), 0);
  SchedSeq* def = f.add(6, 0, 100);
  f.now += Scheduler::kMaxWait - 1ms;
  StepPlan p = f.step();
  EXPECT_FALSE(def->running());
  EXPECT_TRUE(p.preempted.empty());
  f.now += 1ms;
  p = f.step();
  EXPECT_TRUE(def->running());
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], big);
}

}  // namespace
