// TokenSet: a kept token mask in the smallest of three forms (XGrammar's
// adaptive storage): the allowed ids (a structural state allows a few
// dozen), the rejected ids (inside a string nearly all are allowed), or the
// bitset itself. With a 150k vocabulary a bitset is 19 KB; most states need
// a few hundred bytes as a list, so an automaton keeps many more masks in
// the same memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nexus::grammar {

class TokenSet {
 public:
  // `bits`: bit id % 64 of word id / 64, no bit at or past n_vocab.
  TokenSet(const std::vector<uint64_t>& bits, int32_t n_vocab);

  // The bitset back, exactly as given (resized to the vocabulary's words).
  void to_bits(std::vector<uint64_t>& out) const;
  size_t bytes() const;  // memory held

  enum class Form : uint8_t { Allowed, Rejected, Bits };
  Form form() const { return form_; }

 private:
  Form form_ = Form::Bits;
  int32_t n_vocab_ = 0;
  std::vector<int32_t> ids_;    // Allowed / Rejected: sorted ids
  std::vector<uint64_t> bits_;  // Bits
};

}  // namespace nexus::grammar
