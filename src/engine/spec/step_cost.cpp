#include "engine/spec/step_cost.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace nexus::spec {

namespace {

// Weight of the newest step in the average: 0.2 when it is dearer, 0.5 when
// it is cheaper. Time the OS gives to other threads (the server's I/O, a
// client on the same cores) only ever adds to a step, and which sizes are
// measured at such moments is not random (a lone stream decodes plainly
// while the next request is being read), so the average leans towards the
// cheaper steps: the cost the step itself needs.
constexpr double kAlphaUp = 0.2, kAlphaDown = 0.5;
// A step counts as at most this many times the average: one slow step (the
// OS took the core, a page fault) moves the average by at most 10%.
constexpr double kMaxOutlier = 1.5;
// A draft must promise this much over the step without it: the estimates
// are averages of noisy steps, and a wrong "yes" costs more than a missed
// small gain (the rule: speculation never makes things slower).
constexpr double kMinGain = 1.10;

}  // namespace

void StepCost::record(int32_t n_tokens, double seconds) {
  if (n_tokens < 1 || seconds <= 0) return;
  const int32_t n = std::min(n_tokens, kMaxTokens);
  double& e = ewma_[static_cast<size_t>(n)];
  if (e > 0) {
    e += (seconds < e ? kAlphaDown : kAlphaUp) * (std::min(seconds, kMaxOutlier * e) - e);
  } else if (seen_once_[static_cast<size_t>(n)] || count_first_) {
    e = seconds;
    measured_.insert(std::lower_bound(measured_.begin(), measured_.end(), n), n);
  } else {
    seen_once_[static_cast<size_t>(n)] = true;  // the first step of a size: one-off costs, not counted
  }
}

double StepCost::seconds(int32_t n_tokens) const {
  const int32_t n = std::clamp(n_tokens, 1, kMaxTokens);
  if (ewma_[static_cast<size_t>(n)] > 0) return ewma_[static_cast<size_t>(n)];
  if (measured_.empty()) return 0;
  // The nearest measured sizes below and above n.
  const auto above = std::lower_bound(measured_.begin(), measured_.end(), n);
  if (above == measured_.begin()) return ewma_[static_cast<size_t>(*above)];  // (never dearer with fewer tokens)
  const int32_t lo = *std::prev(above);
  const double c_lo = ewma_[static_cast<size_t>(lo)];
  if (above != measured_.end()) {
    const int32_t hi = *above;
    const double c_hi = ewma_[static_cast<size_t>(hi)];
    return c_lo + (c_hi - c_lo) * (n - lo) / static_cast<double>(hi - lo);
  }
  const double one = ewma_[1] > 0 ? ewma_[1] : c_lo / lo;
  return c_lo + 0.1 * one * (n - lo);
}

bool StepCost::measured(int32_t n_tokens) const {
  return ewma_[static_cast<size_t>(std::clamp(n_tokens, 1, kMaxTokens))] > 0;
}

int32_t best_draft_length(double q, int32_t n_running, int32_t k_max, const StepCosts& cost,
                          ProposerCost proposer) {
  if (!proposer.known) k_max = std::min(k_max, 1);
  if (k_max < 1) return 0;
  const int32_t n = std::max(n_running, 1);
  if (!cost.plain_fresh(n)) return 0;
  const double base = cost.plain.seconds(n);
  double best_rate = n / base;
  int32_t best_k = 0;
  double expected = 1, qk = 1;  // E(q, k), q^k
  for (int32_t k = 1; k <= k_max; ++k) {
    qk *= q;
    expected += qk;
    // (never cheaper than the step without the draft, whatever the noise)
    const double step = std::max(cost.with_verify(n, n + k), base);
    const double rate = (n - 1 + expected) / (step + k * proposer.token_s + proposer.setup_s);
    if (rate > best_rate * (best_k == 0 ? kMinGain : 1.0)) {
      best_rate = rate;
      best_k = k;
    }
  }
  return best_k;
}

int32_t probe_interval(int32_t n_running, const StepCosts& cost, ProposerCost proposer) {
  const int32_t n = std::max(n_running, 1);
  // Either cost may be estimated: sequences that probe together make larger
  // steps, so with several running cost(n + 1) is seldom measured itself,
  // and when a sequence ends, cost(n - 1) may never have been.
  const double base = cost.plain.seconds(n);
  if (base <= 0 || !proposer.known) return kMinProbeSteps;
  const double budget = kProbeShare * base;  // probing's seconds per step
  if (proposer.catch_up_s >= budget) return kNeverProbe;
  const double fixed = std::max(cost.with_verify(n, n + 1) - base, 0.0) + proposer.token_s;
  const double steps = std::ceil(fixed / (budget - proposer.catch_up_s));
  return static_cast<int32_t>(std::clamp<double>(steps, kMinProbeSteps, kMaxProbeSteps));
}

}  // namespace nexus::spec
