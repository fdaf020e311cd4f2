#include "tokenizer/utf8.h"

namespace nexus::utf8 {
namespace {

// Expected sequence length from the lead byte (0: not a valid lead byte).
// C0, C1 (overlong 2-byte) and F5..FF (beyond U+10FFFF) never start a character.
size_t lead_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Allowed range of the second byte, which excludes overlongs (E0, F0),
// surrogates (ED) and values above U+10FFFF (F4) -- Unicode table 3-7.
bool second_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

Decoded decode(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const uint8_t b0 = p[0];
  const size_t n = lead_length(b0);
  if (n == 1) return {b0, 1, true};
  if (n == 0 || avail < n || !second_ok(b0, p[1])) return {};
  for (size_t i = 2; i < n; ++i) {
    if (!is_cont(p[i])) return {};
  }
  uint32_t cp = 0;
  if (n == 2) cp = ((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu);
  if (n == 3) cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
  if (n == 4) {
    cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  }
  return {cp, n, true};
}

void append(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Decoded d = decode(s, i);
    if (!d.valid) return false;
    i += d.len;
  }
  return true;
}

size_t incomplete_tail(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  // A character is at most 4 bytes, so an unfinished one starts within the
  // last 3 bytes. Find the last non-continuation byte there.
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const uint8_t b = p[n - k];
    if (is_cont(b)) continue;
    const size_t need = lead_length(b);
    if (need <= k) return 0;  // ASCII, invalid lead, or already complete
    if (k >= 2 && !second_ok(b, p[n - k + 1])) return 0;
    return k;  // all following bytes are continuation bytes (checked above)
  }
  return 0;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Decoded d = decode(s, i);
    if (d.valid) {
      out.append(s.substr(i, d.len));
    } else {
      append(out, kReplacement);
    }
    i += d.len;
  }
  return out;
}

}  // namespace nexus::utf8
