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
// changes its rate for reasons of its own). A veto lasts kVetoSteps steps at
// that count, then the draft is judged again on new steps; kMinSteps of
// each kind are needed before a veto.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace nexus::spec {

class DraftVeto {
 public:
  static constexpr int32_t kMaxRuns = 8;  // counts above are recorded as this
  static constexpr int32_t kMinSteps = 8;
  static constexpr int32_t kVetoSteps = 256;

  // A step of decodes and verify runs of n_running sequences: whether the
  // draft model proposed in it (else: no draft at all), the tokens it
  // emitted, its seconds with the draft's passes.
  void record(int32_t n_running, bool drafted, int32_t emitted, double seconds);
  // Whether the draft model is vetoed in a step of n_running sequences;
  // counts the step towards the veto's end.
  bool vetoed(int32_t n_running);

 private:
  struct Rate {
    double tokens_per_s = 0;
    int32_t steps = 0;
  };
  struct Count {
    Rate drafted, plain;
    int32_t veto_left = 0;  // steps the veto still lasts
  };
  static std::size_t key(int32_t n_running);
  std::array<Count, kMaxRuns + 1> counts_{};
};

}  // namespace nexus::spec
