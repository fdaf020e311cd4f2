// KL divergence, top-1 agreement, Δp and Δlogit of a model against a base, in double.
#include "model/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <vector>

#include "util/error.h"

namespace nexus {
namespace {

// log softmax of `z` into `out`; returns the index of the largest logit
// (the first on ties).
size_t log_softmax(std::span<const float> z, std::vector<double>& out) {
  size_t top = 0;
  for (size_t i = 1; i < z.size(); ++i)
    if (z[i] > z[top]) top = i;
  const double max = z[top];
  double sum = 0;
  for (float v : z) sum += std::exp(static_cast<double>(v) - max);
  const double log_norm = max + std::log(sum);
  out.resize(z.size());
  for (size_t i = 0; i < z.size(); ++i) out[i] = static_cast<double>(z[i]) - log_norm;
  return top;
}

// sqrt of a value that only rounding can make negative.
double safe_sqrt(double v) { return v > 0 ? std::sqrt(v) : 0.0; }

Estimate rms_of(const MeanAccumulator& sq) {
  const Estimate ms = sq.mean();
  const double rms = safe_sqrt(ms.value);
  return {rms, rms > 0 ? 0.5 / rms * ms.uncertainty : 0.0};
}

}  // namespace

void KlDivergenceStats::add(std::span<const float> logits, std::span<const float> base_logits, int32_t next_token) {
  if (logits.size() != base_logits.size() || logits.empty())
    throw Error(fmt::format("kl divergence: {} logits against {} of the base", logits.size(), base_logits.size()));
  if (next_token < 0 || static_cast<size_t>(next_token) >= logits.size())
    throw Error(fmt::format("kl divergence: token {} is outside the vocabulary of {}", next_token, logits.size()));
  thread_local std::vector<double> lq, lp;
  const size_t top_q = log_softmax(logits, lq);
  const size_t top_p = log_softmax(base_logits, lp);

  double kl = 0, dz2 = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    const double dz = static_cast<double>(logits[i]) - static_cast<double>(base_logits[i]);
    dz2 += dz * dz;
  }
  kl = std::max(kl, 0.0);  // KL >= 0; a tiny negative sum is rounding
  const size_t t = static_cast<size_t>(next_token);
  nll.add(-lq[t]);
  nll_base.add(-lp[t]);
  sum_nll_nll_base += lq[t] * lp[t];
  kld.add(kl);
  max_kld = std::max(max_kld, kl);
  const double dp = std::exp(lq[t]) - std::exp(lp[t]);
  p_diff.add(dp);
  p_diff_sq.add(dp * dp);
  max_abs_p_diff = std::max(max_abs_p_diff, std::fabs(dp));
  logit_diff_sq.add(dz2 / static_cast<double>(lp.size()));
  if (top_q == top_p) ++n_same_top;
}

Estimate KlDivergenceStats::log_ppl_ratio() const {
  const Estimate a = nll.mean(), b = nll_base.mean();
  const double n = static_cast<double>(count());
  // Covariance of the two means (llama.cpp leaves it 0 below 10 values).
  const double cov = count() > 1 ? (sum_nll_nll_base / n - a.value * b.value) / (n - 1) : 0.0;
  return {a.value - b.value, safe_sqrt(a.uncertainty * a.uncertainty + b.uncertainty * b.uncertainty - 2 * cov)};
}

double KlDivergenceStats::nll_correlation() const {
  const Estimate a = nll.mean(), b = nll_base.mean();
  if (count() < 2 || a.uncertainty <= 0 || b.uncertainty <= 0) return 0;
  const double n = static_cast<double>(count());
  const double cov = (sum_nll_nll_base / n - a.value * b.value) / (n - 1);
  return cov / (a.uncertainty * b.uncertainty);
}

Estimate KlDivergenceStats::same_top() const {
  if (count() == 0) return {};
  const double s = static_cast<double>(n_same_top) / static_cast<double>(count());
  return {s, count() > 1 ? safe_sqrt(s * (1 - s) / static_cast<double>(count() - 1)) : 0.0};
}

Estimate KlDivergenceStats::rms_p_diff() const { return rms_of(p_diff_sq); }

Estimate KlDivergenceStats::rms_logit_diff() const { return rms_of(logit_diff_sq); }

}  // namespace nexus
