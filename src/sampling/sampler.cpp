#include "sampling/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace nexus {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Total order, best first: higher logit, then lower id. A total order keeps
// nth_element / partial_sort well-defined and the result reproducible.
bool better(float la, int32_t ia, float lb, int32_t ib) {
  return la > lb || (la == lb && ia < ib);
}

void check_finite(const char* name, float v) {
  if (!std::isfinite(v)) throw Error(fmt::format("sampling: {} must be a finite number", name));
}

}  // namespace

void Sampler::validate(const SamplingParams& p) {
  check_finite("temperature", p.temperature);
  check_finite("top_p", p.top_p);
  check_finite("min_p", p.min_p);
  check_finite("repeat_penalty", p.repeat_penalty);
  check_finite("frequency_penalty", p.frequency_penalty);
  check_finite("presence_penalty", p.presence_penalty);
  if (p.temperature < 0) throw Error(fmt::format("sampling: temperature must be >= 0 (got {})", p.temperature));
  if (p.top_k < 0) throw Error(fmt::format("sampling: top_k must be >= 0 (got {})", p.top_k));
  if (p.top_p < 0 || p.top_p > 1) throw Error(fmt::format("sampling: top_p must be in [0, 1] (got {})", p.top_p));
  if (p.min_p < 0 || p.min_p > 1) throw Error(fmt::format("sampling: min_p must be in [0, 1] (got {})", p.min_p));
  if (p.repeat_penalty <= 0)
    throw Error(fmt::format("sampling: repeat_penalty must be > 0 (got {})", p.repeat_penalty));
  if (p.repeat_last_n < -1)
    throw Error(fmt::format("sampling: repeat_last_n must be >= -1 (got {})", p.repeat_last_n));
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab) {
  validate(params);
  if (n_vocab <= 0) throw Error(fmt::format("sampling: n_vocab must be positive (got {})", n_vocab));
  if (params.seed) {
    seed_ = *params.seed;
  } else {
    std::random_device rd;
    seed_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  rng_.seed(seed_);
  counts_.assign(static_cast<size_t>(n_vocab), 0);
}

double Sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  const SamplingParams& p = params_;
  if (p.repeat_last_n == 0) return;
  if (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return;
  size_t n = history.size();
  if (p.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(p.repeat_last_n));
  std::span<const int32_t> window = history.subspan(history.size() - n);

  for (int32_t id : window)
    if (id >= 0 && id < n_vocab_) ++counts_[id];
  // Each distinct id is penalised once; zeroing its count marks it done and
  // leaves counts_ all-zero for the next call without an O(n_vocab) clear.
  for (int32_t id : window) {
    if (id < 0 || id >= n_vocab_ || counts_[id] == 0) continue;
    float& l = logits[id];
    l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= static_cast<float>(counts_[id]) * p.frequency_penalty + p.presence_penalty;
    counts_[id] = 0;
  }
}

void Sampler::top_k(int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= cands_.size()) return;
  std::nth_element(cands_.begin(), cands_.begin() + k, cands_.end(), [](const Candidate& a, const Candidate& b) {
    return better(a.logit, a.id, b.logit, b.id);
  });
  cands_.resize(static_cast<size_t>(k));
}

void Sampler::top_p(float p) {
  if (p >= 1.0f || cands_.size() <= 1) return;
  float max_l = kNegInf;
  for (const Candidate& c : cands_) max_l = std::max(max_l, c.logit);
  if (!std::isfinite(max_l)) return;
  double sum = 0;
  for (const Candidate& c : cands_) sum += std::exp(static_cast<double>(c.logit - max_l));

  // Sort only as much of the head as the nucleus needs: chunks of 64, 128,
  // 256, ... each chunk is a partial_sort of the unsorted tail.
  auto cmp = [](const Candidate& a, const Candidate& b) { return better(a.logit, a.id, b.logit, b.id); };
  const size_t n = cands_.size();
  size_t sorted = 0, chunk = std::min<size_t>(n, 64);
  double cum = 0;
  for (;;) {
    std::partial_sort(cands_.begin() + sorted, cands_.begin() + chunk, cands_.end(), cmp);
    for (size_t i = sorted; i < chunk; ++i) {
      cum += std::exp(static_cast<double>(cands_[i].logit - max_l)) / sum;
      if (cum >= p) {
        cands_.resize(i + 1);
        return;
      }
    }
    if (chunk == n) return;  // rounding left cum a hair below p: keep all
    sorted = chunk;
    chunk = std::min(n, chunk * 2);
  }
}

void Sampler::min_p(float p) {
  if (p <= 0.0f || cands_.size() <= 1) return;
  float max_l = kNegInf;
  for (const Candidate& c : cands_) max_l = std::max(max_l, c.logit);
  if (!std::isfinite(max_l)) return;
  // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p)
  const float threshold = max_l + std::log(p);
  std::erase_if(cands_, [&](const Candidate& c) { return c.logit < threshold; });
}

int32_t Sampler::draw(float temperature) {
  const Candidate* best = &cands_[0];
  for (const Candidate& c : cands_)
    if (better(c.logit, c.id, best->logit, best->id)) best = &c;
  if (!std::isfinite(best->logit) || cands_.size() == 1) return best->id;

  const double inv_t = 1.0 / temperature;
  probs_.resize(cands_.size());
  double sum = 0;
  for (size_t i = 0; i < cands_.size(); ++i) {
    probs_[i] = std::exp(static_cast<double>(cands_[i].logit - best->logit) * inv_t);
    sum += probs_[i];
  }
  if (!(sum > 0) || !std::isfinite(sum)) return best->id;
  const double u = uniform01() * sum;
  double acc = 0;
  int32_t last_nonzero = best->id;
  for (size_t i = 0; i < cands_.size(); ++i) {
    if (probs_[i] <= 0) continue;
    acc += probs_[i];
    last_nonzero = cands_[i].id;
    if (u < acc) return cands_[i].id;
  }
  return last_nonzero;  // u landed past the rounded total
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.size() != static_cast<size_t>(n_vocab_))
    throw Error(fmt::format("sampling: got {} logits for a vocabulary of {}", logits.size(), n_vocab_));
  apply_penalties(logits, history);

  if (params_.temperature <= 0.0f) {
    int32_t best = 0;
    float best_l = std::isnan(logits[0]) ? kNegInf : logits[0];
    for (int32_t i = 1; i < n_vocab_; ++i) {
      if (logits[i] > best_l) {  // strict: ties keep the lowest id; NaN never wins
        best_l = logits[i];
        best = i;
      }
    }
    return best;
  }

  cands_.resize(logits.size());
  for (int32_t i = 0; i < n_vocab_; ++i)
    cands_[i] = {std::isnan(logits[i]) ? kNegInf : logits[i], i};  // NaN would break the ordering
  top_k(params_.top_k);
  top_p(params_.top_p);
  min_p(params_.min_p);
  return draw(params_.temperature);
}

}  // namespace nexus
