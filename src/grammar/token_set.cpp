#include "grammar/token_set.h"

#include <bit>

namespace nexus::grammar {

TokenSet::TokenSet(const std::vector<uint64_t>& bits, int32_t n_vocab) : n_vocab_(n_vocab) {
  const size_t words = (static_cast<size_t>(n_vocab) + 63) / 64;
  size_t allowed = 0;
  for (size_t w = 0; w < words && w < bits.size(); ++w) allowed += static_cast<size_t>(std::popcount(bits[w]));
  const size_t rejected = static_cast<size_t>(n_vocab) - allowed;
  const size_t as_bits = words * sizeof(uint64_t);
  if (allowed * sizeof(int32_t) < as_bits && allowed <= rejected) {
    form_ = Form::Allowed;
  } else if (rejected * sizeof(int32_t) < as_bits) {
    form_ = Form::Rejected;
  } else {
    bits_.assign(words, 0);
    for (size_t w = 0; w < words && w < bits.size(); ++w) bits_[w] = bits[w];
    return;
  }
  const bool want = form_ == Form::Allowed;
  ids_.reserve(want ? allowed : rejected);
  for (size_t w = 0; w < words; ++w) {  // the wanted bits of each word, lowest first
    uint64_t x = w < bits.size() ? bits[w] : 0;
    if (!want) x = ~x;
    while (x != 0) {
      const auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(x)));
      if (id >= n_vocab) break;
      ids_.push_back(id);
      x &= x - 1;
    }
  }
}

void TokenSet::to_bits(std::vector<uint64_t>& out) const {
  const size_t words = (static_cast<size_t>(n_vocab_) + 63) / 64;
  switch (form_) {
    case Form::Bits:
      out = bits_;
      return;
    case Form::Allowed:
      out.assign(words, 0);
      for (int32_t id : ids_) out[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      return;
    case Form::Rejected:
      out.assign(words, ~uint64_t{0});
      if (n_vocab_ % 64 != 0) out.back() = (uint64_t{1} << (n_vocab_ % 64)) - 1;
      for (int32_t id : ids_) out[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63));
      return;
  }
}

size_t TokenSet::bytes() const { return ids_.capacity() * sizeof(int32_t) + bits_.capacity() * sizeof(uint64_t) + sizeof *this; }

}  // namespace nexus::grammar
