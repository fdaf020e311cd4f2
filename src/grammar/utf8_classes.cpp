#include "grammar/utf8_classes.h"

#include <algorithm>
#include <array>

namespace nexus::grammar {
namespace {

constexpr uint32_t kMax = 0x10FFFF, kSurLo = 0xD800, kSurHi = 0xDFFF;

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

std::array<uint8_t, 4> encode(uint32_t cp, int n) {
  std::array<uint8_t, 4> b{};
  static constexpr uint8_t kLead[5] = {0, 0x00, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    b[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  b[0] = static_cast<uint8_t>(kLead[n] | cp);
  return b;
}

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (unsigned c = lo; c <= hi; ++c) s.set(c);
  return s;
}

// lo..hi share an encoded length n.
void split(uint32_t lo, uint32_t hi, int n, std::vector<std::vector<ByteSet>>& out) {
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, n, out);
        split((lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, n, out);
        split(hi & ~m, hi, n, out);
        return;
      }
    }
  }
  const auto a = encode(lo, n), b = encode(hi, n);
  std::vector<ByteSet> seq;
  for (int k = 0; k < n; ++k) seq.push_back(byte_range(a[k], b[k]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodeRange> normalize(std::vector<CodeRange> ranges) {
  std::vector<CodeRange> cut;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMax);
    if (lo > hi) continue;
    if (lo < kSurLo && hi > kSurHi) {  // remove the surrogates from the middle
      cut.emplace_back(lo, kSurLo - 1);
      cut.emplace_back(kSurHi + 1, hi);
    } else if (lo >= kSurLo && hi <= kSurHi) {
      continue;
    } else if (lo >= kSurLo && lo <= kSurHi) {
      cut.emplace_back(kSurHi + 1, hi);
    } else if (hi >= kSurLo && hi <= kSurHi) {
      cut.emplace_back(lo, kSurLo - 1);
    } else {
      cut.emplace_back(lo, hi);
    }
  }
  std::sort(cut.begin(), cut.end());
  std::vector<CodeRange> out;
  for (const CodeRange& r : cut) {
    if (!out.empty() && r.first <= out.back().second + 1) out.back().second = std::max(out.back().second, r.second);
    else out.push_back(r);
  }
  return out;
}

std::vector<CodeRange> complement(const std::vector<CodeRange>& normalized) {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalized) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMax) out.emplace_back(next, kMax);
  return normalize(std::move(out));
}

std::vector<std::vector<ByteSet>> utf8_sequences(const std::vector<CodeRange>& normalized) {
  std::vector<std::vector<ByteSet>> multi;
  ByteSet ascii;
  for (auto [lo, hi] : normalized) {
    for (uint32_t start = lo; start <= hi;) {
      const int n = encoded_length(start);
      const uint32_t end_of_len = n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : kMax;
      const uint32_t stop = std::min(hi, end_of_len);
      if (n == 1) {
        for (uint32_t c = start; c <= stop; ++c) ascii.set(c);
      } else {
        split(start, stop, n, multi);
      }
      start = stop + 1;
    }
  }
  std::vector<std::vector<ByteSet>> out;
  if (ascii.any()) out.push_back({ascii});
  for (auto& s : multi) out.push_back(std::move(s));
  return out;
}

}  // namespace nexus::grammar
