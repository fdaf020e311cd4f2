// UTF-8 helpers of the Jinja interpreter: code points (string indexing,
// slicing and length count code points, as Python does), the whitespace set
// of JavaScript's \s and String#trim (the reference renderer's), ASCII case.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nexus::tmpl {

struct Utf8Char {
  uint32_t cp;
  size_t len;  // bytes, >= 1 (an invalid byte decodes as itself, length 1)
};

inline Utf8Char decode_utf8(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80; };
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3f); };
  if (c < 0x80) return {c, 1};
  if ((c & 0xe0) == 0xc0 && cont(1)) return {((c & 0x1fu) << 6) | byte(1), 2};
  if ((c & 0xf0) == 0xe0 && cont(1) && cont(2)) return {((c & 0x0fu) << 12) | (byte(1) << 6) | byte(2), 3};
  if ((c & 0xf8) == 0xf0 && cont(1) && cont(2) && cont(3))
    return {((c & 0x07u) << 18) | (byte(1) << 12) | (byte(2) << 6) | byte(3), 4};
  return {c, 1};
}

// JavaScript's \s (what trim() and the lexer skip).
inline bool is_js_space(uint32_t cp) {
  if (cp <= 32) return cp == 32 || (cp >= 9 && cp <= 13);
  return cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000 || cp == 0xfeff;
}

// Bytes of whitespace at s[i] (0 when none).
inline size_t space_len_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const Utf8Char u = decode_utf8(s, i);
  return is_js_space(u.cp) ? u.len : 0;
}

// Byte offsets where each code point starts, plus s.size() at the end.
inline std::vector<size_t> code_point_starts(std::string_view s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size(); i += decode_utf8(s, i).len) at.push_back(i);
  at.push_back(s.size());
  return at;
}

inline size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += decode_utf8(s, i).len) ++n;
  return n;
}

inline std::string_view trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = space_len_at(s, i)) i += n;
  return s.substr(i);
}

inline std::string_view trim_end(std::string_view s) {
  // Walk forward remembering where the last non-space code point ended.
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char u = decode_utf8(s, i);
    i += u.len;
    if (!is_js_space(u.cp)) end = i;
  }
  return s.substr(0, end);
}

inline std::string_view trim(std::string_view s) { return trim_end(trim_start(s)); }

inline std::string ascii_lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return o;
}

inline std::string ascii_upper(std::string_view s) {
  std::string o(s);
  for (char& c : o) if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return o;
}

}  // namespace nexus::tmpl
