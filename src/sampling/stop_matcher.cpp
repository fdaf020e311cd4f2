#include "sampling/stop_matcher.h"

#include <algorithm>

namespace nexus {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Result StopMatcher::feed(std::string_view delta) {
  Result r;
  if (stopped_) {
    r.stopped = true;
    r.stop = which_;
    return r;
  }
  pending_.append(delta);
  if (stops_.empty()) {
    r.text = std::move(pending_);
    pending_.clear();
    return r;
  }

  // A complete stop string anywhere in the pending text?
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stops_) {
    size_t pos = pending_.find(s);
    if (pos < best_pos) {
      best_pos = pos;
      best = &s;
    }
  }
  if (best) {
    stopped_ = true;
    which_ = *best;
    r.text = pending_.substr(0, best_pos);
    r.stopped = true;
    r.stop = which_;
    pending_.clear();
    return r;
  }

  // Hold back the longest tail that is a proper prefix of some stop string.
  // (No full match is present, so any such tail is shorter than its stop.)
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  size_t split = pending_.size() - hold;
  // Never cut a UTF-8 character in two (possible only with a stop string
  // that starts with a continuation byte): hold back the whole character.
  while (split > 0 && split < pending_.size() &&
         (static_cast<unsigned char>(pending_[split]) & 0xC0) == 0x80)
    --split;
  r.text = pending_.substr(0, split);
  pending_.erase(0, split);
  return r;
}

std::string StopMatcher::flush() {
  std::string out = stopped_ ? std::string() : std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace nexus
