// The measured cost of engine steps, and the draft length it makes worth
// proposing (docs/speculative.md, "Adaptive").
//
// StepCost keeps, per number of tokens in a step (every run's tokens:
// decodes, verify runs, prefill chunks), an exponential moving average of
// the step's wall time (proposing, the forward pass, sampling, delivering
// the tokens), recorded by the engine after each step. The first step of
// each size is not counted: it pays one-off costs (the engine's buffers
// grow into fresh pages: on TinyLLama-v0 the first 4- to 6-token steps took
// 1.3-2.3x the later ones), and an average started there made that size
// look too dear to be chosen again, so it was never measured again. A step
// counts as at most 1.5x the average, for the same reason. A
// speculative verify run adds its k draft tokens to the step, so the
// step's cost moves from cost(n) to cost(n + k): what that costs is read
// from this table, measured on this machine at this load, not assumed.
//
// best_draft_length: with per-token acceptance probability q (each draft
// token the model's own choice with probability q, independently), a verify
// run of k draft tokens emits E(q, k) = 1 + q + ... + q^k tokens on average
// (the accepted ones, then the model's next). The step's n_running
// sequences emit n_running - 1 + E tokens in cost(n_running + k) seconds;
// the k chosen maximises that rate, 0 (no draft) when none beats the step
// without it by 10%. Sizes never measured are estimated: interpolated between the
// nearest measured ones, or above the largest, its cost plus 10% of the
// one-token step per extra token (a guess that errs towards trying: the
// next such step measures it).
#pragma once

#include <array>
#include <cstdint>

namespace nexus::spec {

class StepCost {
 public:
  static constexpr int32_t kMaxTokens = 512;  // larger steps are recorded as this size

  // A step of n_tokens (>= 1) whose forward pass took `seconds`.
  void record(int32_t n_tokens, double seconds);
  // The estimated seconds of a step of n_tokens; 0 while nothing is measured.
  double seconds(int32_t n_tokens) const;
  // Whether a step of exactly n_tokens has been measured (not estimated).
  bool measured(int32_t n_tokens) const;

 private:
  std::array<double, kMaxTokens + 1> ewma_{};  // 0: not measured
  std::array<bool, kMaxTokens + 1> seen_once_{};  // its first step was seen (and not counted)
};

// The draft length in [0, k_max] (above). `q` in [0, 1]; n_running >= 1.
// 0 while the step without a draft (n_running tokens) is not measured: the
// sequences then decode plainly until it is (two steps: the first of a size
// is not counted). Estimated from the larger sizes instead, it looked as dear
// as they did, so a draft looked free: when every step carried one (a draft
// model, accepted or not), it was never measured, and a draft model twice as
// slow as its target ran at 0.34x.
int32_t best_draft_length(double q, int32_t n_running, int32_t k_max, const StepCost& cost);

// How many steps a sequence whose drafts do not pay (best_draft_length 0)
// decodes plainly before it proposes one token anyway, so that a low
// acceptance is measured again: the extra cost of a one-token draft,
// cost(n_running + 1) - cost(n_running), over kProbeShare of the plain step,
// so that probing costs at most that share of the time; within
// [kMinProbeSteps, kMaxProbeSteps] (the least while cost(n_running) is not
// measured; cost(n_running + 1) may be an estimate, as seconds() gives). Prompt lookup's probe costs ~10% of a TinyLLama-v0 step: every
// 4 steps. A draft model's (it catches up on the tokens it missed, then
// runs) cost ~4 steps of a TinyLLama-v0 with a Q8_0 copy as draft: probed
// every 4 steps, it ran at 0.47x.
inline constexpr int32_t kMinProbeSteps = 4, kMaxProbeSteps = 256;
inline constexpr double kProbeShare = 0.03;
int32_t probe_interval(int32_t n_running, const StepCost& cost);

}  // namespace nexus::spec
