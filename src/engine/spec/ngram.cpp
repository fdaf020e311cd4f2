#include "engine/spec/ngram.h"

#include <algorithm>

namespace nexus::spec {

int32_t ngram_propose(std::span<const int32_t> tokens, int32_t max_n, int32_t k, std::vector<int32_t>& out) {
  out.clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k < 1 || max_n < 1 || len < 2) return 0;
  for (int64_t m = std::min<int64_t>(max_n, len - 1); m >= 1; --m) {
    const int32_t* tail = tokens.data() + (len - m);
    // Candidate windows [start, start + m) end before the tail's last token,
    // so at least one token follows them; the most recent one first.
    for (int64_t start = len - m - 1; start >= 0; --start) {
      if (!std::equal(tail, tail + m, tokens.data() + start)) continue;
      const int64_t from = start + m, to = std::min(len, from + k);
      out.assign(tokens.begin() + from, tokens.begin() + to);
      return static_cast<int32_t>(out.size());
    }
  }
  return 0;
}

}  // namespace nexus::spec
