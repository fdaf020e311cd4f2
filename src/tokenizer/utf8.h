// UTF-8 helpers shared by the tokenizers and StreamDecoder.
//
// Source: RFC 3629 (UTF-8) and Unicode 15, section 3.9, table 3-7 (well-formed
// byte sequences): overlong forms, surrogates (U+D800..U+DFFF) and values
// above U+10FFFF are invalid. Nothing here throws: invalid input is reported
// through return values so callers can fall back to bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nexus::utf8 {

inline constexpr uint32_t kReplacement = 0xFFFD;  // U+FFFD REPLACEMENT CHARACTER

// Result of decoding one character at a position.
struct Decoded {
  uint32_t cp = 0;   // the code point (kReplacement when !valid)
  size_t len = 1;    // bytes consumed: the whole character, or 1 when invalid
  bool valid = false;
};

// Decodes the character starting at s[pos] (pos < s.size()). An invalid or
// truncated sequence yields {kReplacement, 1, false}: exactly one byte is
// consumed so the caller can resynchronise on the next byte.
Decoded decode(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of `cp` (values that are not scalar values are
// written as U+FFFD).
void append(std::string& out, uint32_t cp);

// Whether `s` is entirely well-formed UTF-8.
bool is_valid(std::string_view s);

// Number of trailing bytes of `s` that are the beginning of a well-formed
// multi-byte character whose remaining bytes have not arrived yet (0..3).
// StreamDecoder holds these back; everything before them is complete.
size_t incomplete_tail(std::string_view s);

// Copies `s`, replacing each invalid byte (or truncated sequence, byte by
// byte) with U+FFFD, so the result is always valid UTF-8.
std::string sanitize(std::string_view s);

}  // namespace nexus::utf8
