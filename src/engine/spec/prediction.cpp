#include "engine/spec/prediction.h"

#include <algorithm>

namespace nexus::spec {

void PredictionTracker::on_token(std::span<const int32_t> output) {
  if (output.empty()) return;
  const int32_t id = output.back();
  if (aligned_) {
    if (pos_ < p_.size() && p_[pos_] == id) {
      ++pos_;
      ++accepted_;
      return;
    }
    aligned_ = false;  // the search for a new alignment starts at pos_
  }
  const size_t m = std::min<size_t>(kResync, output.size());
  const int32_t* tail = output.data() + (output.size() - m);
  for (size_t from = pos_; from + m <= p_.size(); ++from) {
    if (!std::equal(tail, tail + m, p_.data() + from)) continue;
    pos_ = from + m;
    accepted_ += static_cast<int32_t>(m);
    aligned_ = true;
    return;
  }
}

int32_t PredictionTracker::propose(int32_t k, std::vector<int32_t>& out) const {
  out.clear();
  if (!aligned_ || k < 1 || pos_ >= p_.size()) return 0;
  const size_t to = std::min(p_.size(), pos_ + static_cast<size_t>(k));
  out.assign(p_.begin() + static_cast<std::ptrdiff_t>(pos_), p_.begin() + static_cast<std::ptrdiff_t>(to));
  return static_cast<int32_t>(out.size());
}

}  // namespace nexus::spec
