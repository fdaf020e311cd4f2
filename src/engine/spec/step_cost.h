// The measured cost of engine steps, and the draft length it makes worth
// proposing (docs/speculative.md, "Adaptive").
//
// StepCost keeps, per step size in tokens, a moving average of the step's
// wall time (proposing, the forward pass, sampling, delivering the tokens;
// a draft model's passes are not in it, they have their own StepCost by pass
// size: DraftModel::pass_cost). The engine keeps two kinds (StepCosts
// below): plain steps, and steps with a verify run by their runs. The
// average leans to the cheaper steps (a cheaper step weighs 0.5, a dearer
// one 0.2): time the OS gives to other threads only ever adds to a step. The
// first step of each size is not counted: it pays one-off costs (the
// engine's buffers grow into fresh pages: on TinyLLama-v0 the first 4- to
// 6-token steps took 1.3-2.3x the later ones), and an average started there
// made that size look too dear to be chosen again, so it was never measured
// again. A step counts as at most 1.5x the average, for the same reason.
//
// best_draft_length: with per-token acceptance probability q (each draft
// token the model's own choice with probability q, independently), a verify
// run of k draft tokens emits E(q, k) = 1 + q + ... + q^k tokens on average
// (the accepted ones, then the model's next). The step's n_running
// sequences emit n_running - 1 + E tokens in verify(n_running runs,
// n_running + k tokens) seconds (at least the plain step's), plus what the
// proposer itself takes for k tokens and its catch-up's share (a draft
// model's passes, timed apart from the step: ProposerCost); the k chosen
// maximises that rate, 0 (no draft) when none beats the plain step by 10%.
// Sizes never measured are estimated: a verify size as a plain step of its
// tokens, a plain size interpolated between the nearest measured ones, or
// above the largest, its cost plus 10% of the one-token step per extra
// token (a guess that errs towards trying: the next such step measures it).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace nexus::spec {

class StepCost {
 public:
  static constexpr int32_t kMaxTokens = 512;  // larger steps are recorded as this size

  // count_first: the first step of each size counts too (for a caller that
  // paid the one-off costs before timing: DraftModel warms up).
  explicit StepCost(bool count_first = false) : count_first_(count_first) {}

  // A step of n_tokens (>= 1) whose forward pass took `seconds`.
  void record(int32_t n_tokens, double seconds);
  // The estimated seconds of a step of n_tokens; 0 while nothing is measured.
  double seconds(int32_t n_tokens) const;
  // Whether a step of exactly n_tokens has been measured (not estimated).
  bool measured(int32_t n_tokens) const;

 private:
  std::array<double, kMaxTokens + 1> ewma_{};  // 0: not measured
  std::array<bool, kMaxTokens + 1> seen_once_{};  // its first step was seen (and not counted)
  bool count_first_;
  std::vector<int32_t> measured_;  // the sizes with an average, ascending (seconds() searches them)
};

// The engine's step costs: steps without a verify run by their tokens, and
// steps with one by their runs (sequences) and tokens. One table by tokens
// held both, and a step's cost is not a function of its tokens alone: 2
// sequences decoding (each thread runs one through every layer) took 580-750
// us on a d256 llama where one sequence verifying 3 draft tokens (4 tokens)
// took 580, and verify steps after a draft model's passes ran dearer than
// plain ones of the same size. With the mixed table, 2 streams chose drafts
// that only looked cheap and ran at 0.74x, 4 streams at 0.85x.
//
// A plain step of a size not measured for kRefreshSteps steps is measured
// again (best_draft_length proposes nothing): while every step of a lone
// stream carried a draft, its plain step's cost stayed what one step under
// load had made it (864-938 us where it takes ~450), and the draft, though
// it did not pay, looked worth it.
struct StepCosts {
  static constexpr int32_t kMaxRuns = 8;  // verify steps of more runs are recorded as this many
  static constexpr int64_t kRefreshSteps = 64;
  StepCost plain;                                 // steps without a verify run
  std::array<StepCost, kMaxRuns + 1> verify;      // [runs]: steps with one or more
  int64_t steps = 0;                              // recorded so far
  std::array<int64_t, StepCost::kMaxTokens + 1> plain_at{};  // [tokens]: `steps` at its last plain step
  void record(int32_t n_runs, int32_t n_tokens, double seconds, bool verifies) {
    ++steps;
    if (!verifies) plain_at[static_cast<size_t>(std::clamp(n_tokens, 1, StepCost::kMaxTokens))] = steps;
    (verifies ? verify[runs_key(n_runs)] : plain).record(n_tokens, seconds);
  }
  // Whether the plain step of n_tokens is measured and was measured again
  // within the last kRefreshSteps steps.
  bool plain_fresh(int32_t n_tokens) const {
    return plain.measured(n_tokens) &&
           steps - plain_at[static_cast<size_t>(std::clamp(n_tokens, 1, StepCost::kMaxTokens))] <= kRefreshSteps;
  }
  // A step of n_runs sequences and n_tokens with a verify run: as measured,
  // or while that size is not, as a plain step (interpolated as
  // StepCost::seconds does).
  double with_verify(int32_t n_runs, int32_t n_tokens) const {
    const StepCost& v = verify[runs_key(n_runs)];
    return v.measured(n_tokens) ? v.seconds(n_tokens) : plain.seconds(n_tokens);
  }
  static size_t runs_key(int32_t n_runs) { return static_cast<size_t>(std::clamp(n_runs, 1, kMaxRuns)); }
};

// What a proposer costs by itself, apart from the engine's step: seconds per
// proposed token (0: n-gram lookup and a client's prediction, whose cost is
// a lookup inside the step); seconds per token of the sequence it must
// catch up on after steps without a draft (a draft model's KV follows the
// sequence only when it proposes); or not yet known (a draft model never
// timed). An unknown cost is tried at one token (best_draft_length proposes
// at most one): that measures it at the price of one draft pass, where the
// longest draft, guessed free, cost a fresh engine k passes per step until
// measured (a Q8_0 TinyLLama-v0 drafting for the F32 one, its passes 3.5x
// the target's step, ran at 0.55-0.73x in bench_spec's 48-token rounds).
// setup_s: what this proposal costs before its first token, as a share of
// each step (a draft model's catch-up on the tokens it has not seen, spread
// over the steps it may serve: the caller's choice).
struct ProposerCost {
  double token_s = 0;
  double catch_up_s = 0;
  double setup_s = 0;
  bool known = true;
};

// The draft length in [0, k_max] (above). `q` in [0, 1]; n_running >= 1.
// 0 while the step without a draft (n_running tokens) is not measured, or
// not measured again for kRefreshSteps steps: the sequences then decode
// plainly until it is (two steps the first time: the first of a size is not
// counted). Estimated from the larger sizes instead, it looked as dear
// as they did, so a draft looked free: when every step carried one (a draft
// model, accepted or not), it was never measured, and a draft model twice as
// slow as its target ran at 0.34x.
int32_t best_draft_length(double q, int32_t n_running, int32_t k_max, const StepCosts& cost,
                          ProposerCost proposer = {});

// How many steps a sequence whose drafts do not pay (best_draft_length 0)
// decodes plainly before it proposes one token anyway, so that a low
// acceptance is measured again: a probe after g plain steps adds to the
// step cost(n_running + 1) - cost(n_running), the proposer's token and its
// catch-up on the g tokens it missed; g is the least that keeps probing
// within kProbeShare of the plain step's time, in [kMinProbeSteps,
// kMaxProbeSteps] (the least while no step or the proposer's cost is
// measured; cost(n_running) and cost(n_running + 1) may be estimates, as
// seconds() gives). kNeverProbe when the catch-up alone takes more than
// that share of each step: no interval keeps probing within it (a random
// d256 llama drafting for its F32 original with 4 streams: a probe every 5
// steps cost 14 times what it was counted, and the streams ran at 0.83x).
// Prompt lookup's probe costs ~10% of a TinyLLama-v0 step: every 4 steps.
inline constexpr int32_t kMinProbeSteps = 4, kMaxProbeSteps = 256;
inline constexpr int32_t kNeverProbe = INT32_MAX;
inline constexpr double kProbeShare = 0.03;
int32_t probe_interval(int32_t n_running, const StepCosts& cost, ProposerCost proposer = {});

}  // namespace nexus::spec
