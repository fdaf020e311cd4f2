#include "sampling/sampler.h"

#include <fmt/format.h>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/fast_exp.h"
#include "util/error.h"

namespace nexus {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Total order, best first: higher logit, then lower id. A total order keeps
// the top_k heap and sorts well-defined and the result reproducible.
bool better(float la, int32_t ia, float lb, int32_t ib) {
  return la > lb || (la == lb && ia < ib);
}

// The seed of a request that names none. Constructing a std::random_device
// costs a CPUID and a getrandom() call, about 20 us in a VM, and this runs
// on the engine thread for every request; so the device is read once per
// process and each request takes the next value of SplitMix64 (Steele,
// Lea & Flood 2014) from there: distinct, well-mixed seeds.
uint64_t fresh_seed() {
  static const uint64_t base = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<uint64_t> n{0};
  uint64_t z = base + (n.fetch_add(1, std::memory_order_relaxed) + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A logit as the filters and the draw see it: NaN (which would break every
// ordering) becomes -inf, a token that is never drawn.
float nan_to_neg_inf(float x) { return std::isnan(x) ? kNegInf : x; }

void check_finite(const char* name, float v) {
  if (!std::isfinite(v)) throw Error(fmt::format("sampling: {} must be a finite number", name));
}

// Max ignoring NaN (-inf when empty or all NaN), lane-wise so it vectorizes
// instead of serializing on one compare-and-select chain.
float max_of(std::span<const float> v) {
  float lanes[8];
  std::fill(lanes, lanes + 8, kNegInf);
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8)
    for (size_t j = 0; j < 8; ++j) lanes[j] = std::max(lanes[j], v[i + j]);  // max(m, NaN) = m
  float max_l = kNegInf;
  for (; i < v.size(); ++i) max_l = std::max(max_l, v[i]);
  for (float l : lanes) max_l = std::max(max_l, l);
  return max_l;
}

// Lowest id among the maximal logits; NaN never wins (all NaN: 0). One pass:
// each of 32 lanes (4 registers, for independent compare chains) keeps its
// first maximum (a strict > never takes NaN or a later tie), then the lanes
// are merged by value, ties to the lower id.
int32_t argmax(std::span<const float> logits) {
  const size_t n = logits.size();
  const float* l = logits.data();
  constexpr int kRegs = 4, kLanes = 8 * kRegs;
  __m256 best[kRegs];
  __m256i at[kRegs], idx[kRegs];
  for (int r = 0; r < kRegs; ++r) {
    best[r] = _mm256_set1_ps(kNegInf);
    at[r] = _mm256_set1_epi32(-1);
    idx[r] = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * r));
  }
  const __m256i step = _mm256_set1_epi32(kLanes);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int r = 0; r < kRegs; ++r) {
      const __m256 v = _mm256_loadu_ps(l + i + 8 * r);
      const __m256 gt = _mm256_cmp_ps(v, best[r], _CMP_GT_OQ);  // false for NaN
      best[r] = _mm256_blendv_ps(best[r], v, gt);
      at[r] = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(at[r]), _mm256_castsi256_ps(idx[r]), gt));
      idx[r] = _mm256_add_epi32(idx[r], step);
    }
  alignas(32) float lane_best[kLanes];
  alignas(32) int32_t lane_at[kLanes];
  for (int r = 0; r < kRegs; ++r) {
    _mm256_store_ps(lane_best + 8 * r, best[r]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_at + 8 * r), at[r]);
  }
  float max_l = kNegInf;
  int32_t id = -1;
  for (int j = 0; j < kLanes; ++j)
    if (lane_at[j] >= 0 && (lane_best[j] > max_l || (lane_best[j] == max_l && lane_at[j] < id)))
      max_l = lane_best[j], id = lane_at[j];
  for (; i < n; ++i)  // the tail has the highest ids: it wins only when strictly greater
    if (l[i] > max_l) max_l = l[i], id = static_cast<int32_t>(i);
  if (id >= 0) return id;
  for (size_t k = 0; k < n; ++k)  // nothing above -inf: the first -inf, else (all NaN) 0
    if (l[k] == kNegInf) return static_cast<int32_t>(k);
  return 0;
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
  for (const auto& [id, bias] : p.logit_bias) {
    if (!(bias >= -100.0f && bias <= 100.0f))
      throw Error(fmt::format("sampling: logit_bias of token {} must be in [-100, 100] (got {})", id, bias));
  }
  if (p.logprobs < -1 || p.logprobs > kMaxTopLogprobs)
    throw Error(fmt::format("sampling: logprobs must be in [-1, {}] (got {})", kMaxTopLogprobs, p.logprobs));
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab) {
  validate(params);
  if (n_vocab <= 0) throw Error(fmt::format("sampling: n_vocab must be positive (got {})", n_vocab));
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= n_vocab)
      throw Error(fmt::format("sampling: logit_bias token {} is outside the vocabulary [0, {})", id, n_vocab));
  }
  seed_ = params.seed ? *params.seed : fresh_seed();
  rng_.seed(seed_);
  // counts_ and weight_by_id_ are sized on first use: two [n_vocab] arrays
  // are 256 KB at 32000 ids, above glibc's mmap threshold, so building them
  // here cost a fresh mapping and its page faults per request (63 us of
  // the 65 us construction in bench_sampler BM_Construct), on the engine
  // thread, for a greedy request that never touches them.
}

double Sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  const SamplingParams& p = params_;
  for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
  if (p.repeat_last_n == 0) return;
  if (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return;
  size_t n = history.size();
  if (p.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(p.repeat_last_n));
  std::span<const int32_t> window = history.subspan(history.size() - n);
  if (counts_.empty()) counts_.assign(static_cast<size_t>(n_vocab_), 0);

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

void Sampler::gather(std::span<const float> logits) {
  const int32_t n = n_vocab_, k = params_.top_k;
  cands_.clear();
  if (k > 0 && k < n) {
    // top_k: a heap of the k best so far, worst on top; most logits lose one
    // comparison against the top and are never stored.
    auto worse_on_top = [](const Candidate& a, const Candidate& b) { return better(a.logit, a.id, b.logit, b.id); };
    for (int32_t i = 0; i < k; ++i) cands_.push_back({nan_to_neg_inf(logits[i]), i});
    std::make_heap(cands_.begin(), cands_.end(), worse_on_top);
    for (int32_t i = k; i < n; ++i) {
      const float v = nan_to_neg_inf(logits[i]);
      if (!better(v, i, cands_.front().logit, cands_.front().id)) continue;
      std::pop_heap(cands_.begin(), cands_.end(), worse_on_top);
      cands_.back() = {v, i};
      std::push_heap(cands_.begin(), cands_.end(), worse_on_top);
    }
    std::sort(cands_.begin(), cands_.end(), worse_on_top);  // best first; heap layout is library-specific
    return;
  }
  float threshold = kNegInf;
  if (params_.top_p >= 1.0f && params_.min_p > 0.0f) {
    // min_p right after gathering: filter while copying instead of after.
    const float max_l = max_of(logits);
    if (std::isfinite(max_l)) threshold = max_l + std::log(params_.min_p);
  }
  cands_.resize(static_cast<size_t>(n));
  if (threshold == kNegInf) {  // everything survives (NaN becomes -inf): a plain copy
    for (int32_t i = 0; i < n; ++i) cands_[i] = {nan_to_neg_inf(logits[i]), i};
    return;
  }
  // Branch-free compaction: always write, advance only past survivors.
  size_t m = 0;
  for (int32_t i = 0; i < n; ++i) {
    const float v = nan_to_neg_inf(logits[i]);
    cands_[m] = {v, i};
    m += v >= threshold;
  }
  cands_.resize(m);
}

namespace {

// Candidates as 64-bit keys whose unsigned order is the total order of
// better(): the float's bits made monotone in the high half (negatives
// flipped, positives offset), 0xFFFFFFFF - id in the low half. Sorting
// 8-byte keys with one integer compare is several times faster than moving
// {logit, id} pairs through a two-field comparator.
uint64_t order_key(float logit, int32_t id) {
  const uint32_t b = std::bit_cast<uint32_t>(logit + 0.0f);  // + 0 turns -0 into +0, as == treats them
  const uint32_t mono = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<uint64_t>(mono) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}
int32_t key_id(uint64_t k) { return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(k)); }
float key_logit(uint64_t k) {
  const uint32_t mono = static_cast<uint32_t>(k >> 32);
  return std::bit_cast<float>((mono & 0x80000000u) ? (mono & 0x7FFFFFFFu) : ~mono);
}

}  // namespace

// Nucleus: the smallest set of best candidates whose probability reaches p.
// Two passes, no partitioning: candidates are binned by how far their logit
// lies below the max (kBinsPerNat bins per nat, the last bin catching
// everything further down, -inf and NaN included), with each bin's mass.
// Bins are ordered like the candidates in them, so walking bins from the top
// finds the one where the mass reaches p: every bin above it is kept whole,
// and only that bin's candidates are sorted (by order_key) to place the cut.
void Sampler::top_p(float p) {
  const size_t n = cands_.size();
  if (p >= 1.0f || n <= 1) return;
  weights_.resize(n);
  for (size_t i = 0; i < n; ++i) weights_[i] = cands_[i].logit;
  const float max_l = max_of(weights_);
  if (!std::isfinite(max_l)) return;
  exp_shifted(weights_.data(), weights_.data(), n, max_l, 1.0f);

  constexpr float kBinsPerNat = 16.0f;
  constexpr int32_t kBins = 512;  // 32 nats: below that, e^-32 of the top's weight
  bins_.resize(n);
  // Four copies of the histogram, so consecutive candidates landing in the
  // same bin do not wait on each other's add.
  std::array<std::array<double, kBins>, 4> mass{};
  for (size_t i = 0; i < n; ++i) {
    const float d = (max_l - cands_[i].logit) * kBinsPerNat;  // >= 0; NaN for NaN
    const int32_t b = d < static_cast<float>(kBins - 1) ? static_cast<int32_t>(d) : kBins - 1;
    bins_[i] = static_cast<uint16_t>(b);
    mass[i & 3][b] += weights_[i];
  }
  double total = 0;
  std::array<double, kBins> bin_mass;
  for (int32_t b = 0; b < kBins; ++b) {
    bin_mass[b] = (mass[0][b] + mass[1][b]) + (mass[2][b] + mass[3][b]);
    total += bin_mass[b];
  }
  const double target = static_cast<double>(p) * total;
  double acc = 0;
  int32_t cut_bin = 0;
  while (cut_bin < kBins - 1 && acc + bin_mass[cut_bin] < target) acc += bin_mass[cut_bin++];

  // Keep the bins above cut_bin in candidate order; collect cut_bin's.
  if (weight_by_id_.empty()) weight_by_id_.resize(static_cast<size_t>(n_vocab_));
  keys_.clear();
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (bins_[i] < cut_bin) cands_[kept++] = cands_[i];  // kept <= i: in place
    else if (bins_[i] == cut_bin) {
      keys_.push_back(order_key(cands_[i].logit, cands_[i].id));
      weight_by_id_[cands_[i].id] = weights_[i];
    }
  }
  std::sort(keys_.begin(), keys_.end(), std::greater<>());
  for (uint64_t k : keys_) {
    cands_[kept++] = {key_logit(k), key_id(k)};
    acc += weight_by_id_[key_id(k)];
    if (acc >= target) break;
  }
  cands_.resize(kept);
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
  const size_t n = cands_.size();
  weights_.resize(n);
  for (size_t i = 0; i < n; ++i) weights_[i] = cands_[i].logit;
  return draw_weights(temperature, [&](size_t i) { return cands_[i].id; });
}

int32_t Sampler::draw_all(std::span<const float> logits, float temperature) {
  weights_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) weights_[i] = nan_to_neg_inf(logits[i]);
  return draw_weights(temperature, [](size_t i) { return static_cast<int32_t>(i); });
}

template <class IdOf>
int32_t Sampler::draw_weights(float temperature, IdOf id_of) {
  const size_t n = weights_.size();
  const float max_l = max_of(weights_);
  auto first_max = [&] {  // the first candidate with the max logit
    size_t best = 0;
    while (best + 1 < n && weights_[best] != max_l) ++best;
    return id_of(best);
  };
  // A temperature so small (subnormal) that 1 / T overflows would turn the
  // max's (x - max) / T into 0 * inf = NaN and every weight into 0; it is
  // greedy in the limit. Decided before the weights become exponentials:
  // first_max() reads the logits in weights_.
  const float inv_t = 1.0f / temperature;
  if (!std::isfinite(max_l) || n == 1 || !std::isfinite(inv_t)) return first_max();

  // The max's weight is e^0 = 1 and none exceeds it: 1 <= sum <= n.
  const double sum = exp_shifted(weights_.data(), weights_.data(), n, max_l, inv_t);
  const double u = uniform01() * sum;
  // The candidate where the running sum first exceeds u. Whole blocks are
  // skipped by their sums (independent adds, not one serial chain over the
  // vocabulary), then the block that holds u is walked one weight at a time.
  constexpr size_t kBlock = 64;
  double acc = 0;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t j = 0; j < kBlock; j += 8)
      for (size_t l = 0; l < 8; ++l) lanes[l] += weights_[i + j + l];
    const double block = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    if (u < acc + block) break;
    acc += block;
  }
  for (; i < n; ++i) {
    if (weights_[i] <= 0) continue;
    acc += weights_[i];
    if (u < acc) return id_of(i);
  }
  // u landed past the rounded total: the last candidate with weight.
  for (size_t j = n; j-- > 0;)
    if (weights_[j] > 0) return id_of(j);
  return first_max();
}

bool Sampler::edits_logits() const {
  const SamplingParams& p = params_;
  return !p.logit_bias.empty() ||
         (p.repeat_last_n != 0 && (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f));
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history,
                        std::vector<float>& scratch) {
  if (edits_logits()) {
    scratch.assign(logits.begin(), logits.end());
    return sample(std::span<float>(scratch), history);
  }
  if (logits.size() != static_cast<size_t>(n_vocab_))
    throw Error(fmt::format("sampling: got {} logits for a vocabulary of {}", logits.size(), n_vocab_));
  return choose(logits);
}

int32_t Sampler::choose(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return argmax(logits);
  // No filter can drop a candidate (each of gather, top_p and min_p would
  // return at once): candidate i is id i, so the draw reads the logits
  // without the {logit, id} copy (the same weights, the same id).
  const int32_t k = params_.top_k;
  const bool keeps_all = (k <= 0 || k >= n_vocab_) && params_.top_p >= 1.0f && params_.min_p <= 0.0f;
  if (keeps_all) return draw_all(logits, params_.temperature);
  gather(logits);
  top_p(params_.top_p);
  min_p(params_.min_p);
  return draw(params_.temperature);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.size() != static_cast<size_t>(n_vocab_))
    throw Error(fmt::format("sampling: got {} logits for a vocabulary of {}", logits.size(), n_vocab_));
  apply_penalties(logits, history);
  return choose(logits);
}

}  // namespace nexus
