#include "engine/spec/prediction.h"

#include <algorithm>
#include <climits>

namespace nexus::spec {

namespace {

constexpr int32_t kUnreachable = INT32_MAX / 2;
// Edit costs: a token of P replaced costs less than one skipped or inserted,
// so where both fit -- a changed token inside a run of one repeated token,
// where skipping P's changed token also matches the next one -- the
// alignment keeps to the diagonal, as a replaced token is the commoner edit.
constexpr int32_t kReplace = 2, kSkipOrInsert = 3;

}  // namespace

PredictionTracker::PredictionTracker(std::vector<int32_t> prediction)
    : p_(std::move(prediction)), d_(p_.size() + 1), nd_(p_.size() + 1) {
  hi_ = std::min(p_.size(), kBand);
  for (size_t j = 0; j <= hi_; ++j) d_[j] = kSkipOrInsert * static_cast<int32_t>(j);  // P[0, j) skipped
}

void PredictionTracker::align(int32_t id) {
  const size_t nlo = lo_, nhi = std::min(hi_ + 1, p_.size());
  const auto d = [&](size_t j) { return j >= lo_ && j <= hi_ ? d_[j] : kUnreachable; };
  int32_t best = kUnreachable;
  size_t best_j = nlo;
  bool best_match = false;
  for (size_t j = nlo; j <= nhi; ++j) {
    int32_t v = d(j) + kSkipOrInsert;                        // id inserted
    if (j > nlo) v = std::min(v, nd_[j - 1] + kSkipOrInsert);  // P[j - 1] skipped
    bool match = false;
    if (j > 0) {
      const bool same = p_[j - 1] == id;
      const int32_t diag = d(j - 1) + (same ? 0 : kReplace);  // matched, or P[j - 1] replaced
      match = same && diag <= v;
      v = std::min(v, diag);
    }
    nd_[j] = v;
    // Least cost; among equals the first match (the nearest), else the
    // farthest (a token of P replaced rather than one inserted before it).
    if (v < best || (v == best && !best_match)) {
      best = v;
      best_j = j;
      best_match = match;
    }
  }
  d_.swap(nd_);
  lo_ = std::max(nlo, best_j > kBand ? best_j - kBand : 0);
  hi_ = std::min(nhi, best_j + kBand);
  best_ = best_j;
  prev_matched_ = last_matched_;
  last_matched_ = best_match;
}

void PredictionTracker::restart_at(size_t j) {
  const int32_t cost = d_[best_];
  lo_ = j;
  hi_ = std::min(p_.size(), j + kBand);
  for (size_t i = lo_; i <= hi_; ++i) d_[i] = cost + kSkipOrInsert * static_cast<int32_t>(i - j);
  best_ = j;
  last_matched_ = prev_matched_ = true;
}

void PredictionTracker::on_token(std::span<const int32_t> output) {
  if (output.empty()) return;
  const int32_t id = output.back();
  align(id);
  if (aligned_) {
    if (pos_ < p_.size() && p_[pos_] == id) {
      ++pos_;
      ++accepted_;
      counted_ = output.size();
      return;
    }
    aligned_ = false;  // the search for a new alignment starts at pos_
  }
  // kResync tokens or none: one or two output tokens found further on in P
  // (a "," or a "(") are no evidence of where the output is, and the
  // search never goes back.
  const size_t m = kResync;
  if (output.size() < m) return;
  const int32_t* tail = output.data() + (output.size() - m);
  for (size_t from = pos_; from + m <= p_.size(); ++from) {
    if (!std::equal(tail, tail + m, p_.data() + from)) continue;
    pos_ = from + m;
    // Those m tokens less the ones counted before (an output token is
    // counted once: the realignment may reuse the last match).
    accepted_ += static_cast<int32_t>(std::min(m, output.size() - counted_));
    counted_ = output.size();
    aligned_ = true;
    if (pos_ < lo_ || pos_ > hi_) restart_at(pos_);
    return;
  }
}

int32_t PredictionTracker::propose(int32_t k, std::vector<int32_t>& out) const {
  out.clear();
  if (k < 1 || best_ >= p_.size() || !(last_matched_ || prev_matched_)) return 0;
  const size_t to = std::min(p_.size(), best_ + static_cast<size_t>(k));
  out.assign(p_.begin() + static_cast<std::ptrdiff_t>(best_), p_.begin() + static_cast<std::ptrdiff_t>(to));
  return static_cast<int32_t>(out.size());
}

}  // namespace nexus::spec
