#include "engine/spec/prediction.h"

#include <algorithm>

namespace nexus::spec {

size_t PredictionTracker::find(int32_t id, size_t from, size_t to) const {
  to = std::min(to, p_.size());
  for (size_t j = from; j < to; ++j)
    if (p_[j] == id) return j;
  return p_.size();
}

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
    const size_t j = find(id, pos_, pos_ + kGuessWindow);
    guess_ = j < p_.size() ? j + 1 : pos_ + 1;
    guess_live_ = true;
  } else if (guess_ < p_.size() && p_[guess_] == id) {
    ++guess_;
    guess_live_ = true;
  } else {
    const size_t j = find(id, pos_, guess_ + kGuessWindow);
    guess_live_ = j < p_.size();
    guess_ = guess_live_ ? j + 1 : guess_ + 1;
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
  if (!aligned_ && !guess_live_) return 0;
  const size_t from = aligned_ ? pos_ : guess_;
  if (k < 1 || from >= p_.size()) return 0;
  const size_t to = std::min(p_.size(), from + static_cast<size_t>(k));
  out.assign(p_.begin() + static_cast<std::ptrdiff_t>(from), p_.begin() + static_cast<std::ptrdiff_t>(to));
  return static_cast<int32_t>(out.size());
}

}  // namespace nexus::spec
