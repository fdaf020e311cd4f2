#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nexus {

Logprobs token_logprobs(std::span<const float> logits, int32_t chosen, int32_t k) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  auto value = [&](size_t i) { return std::isnan(logits[i]) ? kNegInf : logits[i]; };
  float max = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) max = std::max(max, value(i));
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += std::exp(static_cast<double>(value(i)) - max);
  // Every logit -inf (or NaN): no distribution; all tokens get -inf.
  const double log_norm = std::isfinite(max) ? max + std::log(sum) : std::numeric_limits<double>::infinity();
  auto logprob = [&](size_t i) { return static_cast<float>(static_cast<double>(value(i)) - log_norm); };

  Logprobs out;
  out.chosen = {chosen, logprob(static_cast<size_t>(chosen))};
  const size_t n = std::min(logits.size(), static_cast<size_t>(std::max(k, 0)));
  if (n == 0) return out;
  auto better = [&](const LogprobEntry& a, const LogprobEntry& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
  };
  // A heap of the n best so far, worst on top.
  out.top.reserve(n);
  for (size_t i = 0; i < logits.size(); ++i) {
    const LogprobEntry e{static_cast<int32_t>(i), logprob(i)};
    if (out.top.size() < n) {
      out.top.push_back(e);
      std::push_heap(out.top.begin(), out.top.end(), better);
    } else if (better(e, out.top.front())) {
      std::pop_heap(out.top.begin(), out.top.end(), better);
      out.top.back() = e;
      std::push_heap(out.top.begin(), out.top.end(), better);
    }
  }
  std::sort(out.top.begin(), out.top.end(), better);
  return out;
}

}  // namespace nexus
