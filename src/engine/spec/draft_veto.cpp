#include "engine/spec/draft_veto.h"

#include <algorithm>

namespace nexus::spec {

namespace {

constexpr double kAlpha = 0.1;  // weight of the newest step in a rate's average

}  // namespace

std::size_t DraftVeto::key(int32_t n_running) { return static_cast<std::size_t>(std::clamp(n_running, 1, kMaxRuns)); }

void DraftVeto::record(int32_t n_running, bool drafted, int32_t emitted, double seconds) {
  if (seconds <= 0 || emitted < 0) return;
  Count& c = counts_[key(n_running)];
  Rate& r = drafted ? c.drafted : c.plain;
  const double rate = emitted / seconds;
  r.tokens_per_s = r.steps == 0 ? rate : r.tokens_per_s + kAlpha * (rate - r.tokens_per_s);
  ++r.steps;
  if (drafted && c.drafted.steps >= kMinSteps && c.plain.steps >= kMinSteps &&
      c.drafted.tokens_per_s < c.plain.tokens_per_s)
    c.veto_left = kVetoSteps;
}

bool DraftVeto::vetoed(int32_t n_running) {
  Count& c = counts_[key(n_running)];
  if (c.veto_left == 0) return false;
  if (--c.veto_left == 0) c.drafted = Rate{};  // judged again on new steps
  return true;
}

}  // namespace nexus::spec
