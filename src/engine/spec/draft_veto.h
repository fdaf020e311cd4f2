// A check of the draft model's decisions against what they gave: the decode
// rate (emitted tokens per second, the draft's passes included) of steps in
// which the draft model proposed, against steps without any draft, by the
// number of running sequences. Where the draft's steps emit fewer tokens per
// second, the draft model is vetoed at that count (docs/speculative.md
// "Adaptive").
//
// Why: best_draft_length weighs estimates (step costs measured at other
// moments, the draft's timed passes, a prior acceptance), and with a client
// on the same 2 cores they erred in its favour: a d256 llama with its Q4_0
// copy as draft ran `nexus serve` at 0.82x with 2 streams and 0.89x with 4,
// while each decision promised a gain. This measures the outcome itself.
//
// Only steps of decodes and verify runs count (a prefill chunk in a step
// changes its rate for reasons of its own). The drafted steps at a count
// are summed in windows of up to kMaxJudgeSteps: once the window has n >=
// kMinJudgeSteps steps, their tokens over their seconds are held against
// the plain steps' (the last ~kPlainSteps of them at that count, at least
// kMinPlainSteps), and a rate below plain's by more than 1/sqrt(n) vetoes
// the draft at that count. Where fewer plain steps were measured, the draft
// is vetoed for as many steps as are missing, so they are (a fresh server's
// first steps at 2 streams all drafted: 0.69x over 16 requests, while each
// estimate promised a gain). A veto lasts kVetoSteps steps; each veto that
// follows a judgement again lasts twice the one before, up to
// kMaxVetoSteps; a window that ends without a veto starts that over.
//
// Why a margin that narrows with the window: with a client on the same
// cores one step's rate varies by half, a 32-step window's by ~8%. An
// average of per-step rates checked at every drafted step (the first
// version) was crossed by noise sooner or later and vetoed a draft paying
// 1.2x for one stream (whose steps' rate gains only ~8%: the rest is
// fewer steps' work outside them, in the server and the client); a fixed
// 32-step window still did, once per few thousand steps. A draft losing
// 25% per step (the d256 pair with 2 streams) is vetoed after ~16-30
// drafted steps.
// Why doubling: with 4 streams the judgements every 256 steps took 1-2% of
// the throughput.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "engine/spec/step_cost.h"

namespace nexus::spec {

class DraftVeto {
 public:
  static constexpr int32_t kMinJudgeSteps = 16;
  static constexpr int32_t kMaxJudgeSteps = 256;
  static constexpr int32_t kPlainSteps = 64;
  static constexpr int32_t kMinPlainSteps = 8;
  static constexpr int32_t kVetoSteps = 256;
  static constexpr int32_t kMaxVetoSteps = 16 * kVetoSteps;

  // A step of decodes and verify runs of n_running sequences: whether the
  // draft model proposed in it (else: no draft at all), the tokens it
  // emitted, its seconds with the draft's passes.
  void record(int32_t n_running, bool drafted, int32_t emitted, double seconds);
  // Whether the draft model is vetoed in a step of n_running sequences;
  // counts the step towards the veto's end.
  bool vetoed(int32_t n_running);

 private:
  struct Sums {
    double tokens = 0, seconds = 0;
    int32_t steps = 0;
  };
  struct Count {
    Sums drafted;  // this window's drafted steps
    Sums plain;    // plain steps, older ones fading (weight 1 - 1/kPlainSteps per newer step)
    int32_t veto_left = 0;            // steps the veto still lasts
    int32_t veto_steps = kVetoSteps;  // the next veto's length
  };
  // [StepCosts::runs_key(n_running)]: counts above StepCosts::kMaxRuns as it.
  std::array<Count, StepCosts::kMaxRuns + 1> counts_{};
};

// The count of running sequences the draft model is judged at (its veto and
// its draft lengths): the most that ran in the last kWindow steps. A stream
// alone for a moment between two requests of a loaded server is judged as
// under that load. Judged as alone (the d256 llama's Q4_0 copy pays 1.2x
// for one stream), it caught the draft up on its context and drafted until
// the next request arrived a few steps later: work thrown away once 2 ran
// again.
class LoadPeak {
 public:
  static constexpr int32_t kWindow = 32;
  // Counts a step of n_running sequences; returns the count to judge it at.
  int32_t step(int32_t n_running);

 private:
  int32_t peak_ = 0, age_ = 0;
};

}  // namespace nexus::spec
