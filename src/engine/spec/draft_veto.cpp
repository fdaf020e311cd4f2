#include "engine/spec/draft_veto.h"

#include <algorithm>
#include <cmath>

namespace nexus::spec {

void DraftVeto::record(int32_t n_running, bool drafted, int32_t emitted, double seconds) {
  if (seconds <= 0 || emitted < 0) return;
  Count& c = counts_[StepCosts::runs_key(n_running)];
  if (!drafted) {
    constexpr double kFade = 1.0 - 1.0 / kPlainSteps;
    c.plain.tokens = kFade * c.plain.tokens + emitted;
    c.plain.seconds = kFade * c.plain.seconds + seconds;
    ++c.plain.steps;
    return;
  }
  if (c.veto_left > 0) return;
  c.drafted.tokens += emitted;
  c.drafted.seconds += seconds;
  const int32_t n = ++c.drafted.steps;
  if (n >= kMinJudgeSteps && c.plain.steps < kMinPlainSteps) {
    // Nothing to judge by: plain steps are measured first (the window is
    // kept and judged at the next drafted step).
    c.veto_left = kMinPlainSteps - c.plain.steps;
    return;
  }
  if (n >= kMinJudgeSteps) {
    // Slower than plain by more than the window's noise allows.
    const double margin = 1.0 / std::sqrt(static_cast<double>(n));
    if (c.drafted.tokens * c.plain.seconds < (1.0 - margin) * c.plain.tokens * c.drafted.seconds) {
      c.drafted = Sums{};
      c.veto_left = c.veto_steps;
      c.veto_steps = std::min(2 * c.veto_steps, kMaxVetoSteps);
      return;
    }
  }
  if (n >= kMaxJudgeSteps) {  // not slower: judged anew on the next window
    c.drafted = Sums{};
    c.veto_steps = kVetoSteps;
  }
}

bool DraftVeto::vetoed(int32_t n_running) {
  Count& c = counts_[StepCosts::runs_key(n_running)];
  if (c.veto_left == 0) return false;
  --c.veto_left;
  return true;
}

int32_t LoadPeak::step(int32_t n_running) {
  if (n_running >= peak_ || ++age_ > kWindow) {
    peak_ = n_running;
    age_ = 0;
  }
  return peak_;
}

}  // namespace nexus::spec
