// The structure-aware mutator of the JSON-facing targets (fuzz_http,
// fuzz_realtime, fuzz_json_schema): the mutations that find issue 42's
// queries of death, which byte-level mutation does not reach within any
// run's length: a value wrapped in N nested arrays or objects (N up to
// 200,000, or around the 128 limit), an element repeated into a huge array,
// a string grown by thousands of characters (escapes, UTF-8, surrogates), a
// key duplicated, a value moved elsewhere or replaced by an edge literal, and
// any of these inside a string that holds JSON (tool-call arguments).
//
// The mutations edit the text lexically (brackets and strings only; nothing
// is parsed into nlohmann::json, whose dump() would recurse per level), so
// they work on broken JSON too. A target defines
//
//   extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* d, size_t n, size_t max, unsigned seed) {
//     return nexus::fuzz::mutate_json_input(d, n, max, seed, nexus::fuzz::Framing::Whole);
//   }
//
// Framing: Whole (the input is one JSON text), Lines (one JSON text per
// '\n'-separated line: a realtime event each), HttpBody (a raw HTTP request
// whose body is the JSON: its Content-Length is rewritten after the body
// changes; a request without one is left to libFuzzer's mutations).
// kStructuralPercent of the calls try a structural mutation; the others, and
// any that finds nothing to edit or no room under max_size, go to
// LLVMFuzzerMutate (for HttpBody, half of those mutate the body alone and
// fix its length). The result never exceeds max_size (libFuzzer's
// -max_len, or less while it grows lengths).
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace nexus::fuzz {

enum class Framing { Whole, Lines, HttpBody };

inline constexpr unsigned kStructuralPercent = 30;
inline constexpr size_t kNpos = std::string_view::npos;

using Rng = std::minstd_rand;

inline size_t uniform(Rng& rng, size_t lo, size_t hi) {  // in [lo, hi]
  return lo + static_cast<size_t>(rng()) % (hi - lo + 1);
}

// A count for nesting, repetition and growth, at most `cap`: small, around
// the 128 nesting limit, thousands, or the sizes (10^4..2*10^5);
// the largest that fits when the tier does not. 0 when cap is 0.
inline size_t pick_count(Rng& rng, size_t cap) {
  static constexpr std::array<std::array<size_t, 2>, 4> kTiers{{{1, 8}, {120, 136}, {500, 5000}, {5000, 200000}}};
  const auto& t = kTiers[rng() % kTiers.size()];
  if (cap < t[0]) return cap;
  return uniform(rng, t[0], std::min(t[1], cap));
}

// One past the end of the JSON value that starts at s[at] ('"', '[', '{' or
// a literal's first byte), matching brackets outside strings; kNpos when the
// text ends first.
inline size_t value_end(std::string_view s, size_t at) {
  if (s[at] == '"') {
    for (size_t i = at + 1; i < s.size(); ++i) {
      if (s[i] == '\\') ++i;
      else if (s[i] == '"') return i + 1;
    }
    return kNpos;
  }
  if (s[at] != '[' && s[at] != '{') {
    size_t i = at;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || std::strchr("+-.", s[i]))) ++i;
    return i;
  }
  size_t depth = 0;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      const size_t e = value_end(s, i);
      if (e == kNpos) return kNpos;
      i = e - 1;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && --depth == 0) {
      return i + 1;
    }
  }
  return kNpos;
}

// Random picks, by reservoir sampling over one lexical pass of s[begin, end):
// a value (string, container or literal), a string (values and keys), a key.
struct Picks {
  size_t value = kNpos, string = kNpos, key = kNpos;
  size_t json_string = kNpos;  // a string whose text starts with '{' or '[' (tool-call arguments)
};

inline Picks pick_positions(std::string_view s, size_t begin, size_t end, Rng& rng) {
  Picks p;
  size_t n_value = 0, n_string = 0, n_key = 0, n_json = 0;
  const auto take = [&rng](size_t& slot, size_t& seen, size_t at) {
    if (rng() % ++seen == 0) slot = at;
  };
  for (size_t i = begin; i < end; ++i) {
    const char c = s[i];
    if (c == '"') {
      const size_t e = value_end(s.substr(0, end), i);
      if (e == kNpos) break;
      size_t after = e;
      while (after < end && std::strchr(" \t\r\n", s[after])) ++after;
      const bool is_key = after < end && s[after] == ':';
      take(is_key ? p.key : p.value, is_key ? n_key : n_value, i);
      take(p.string, n_string, i);
      if (s[i + 1] == '{' || s[i + 1] == '[') take(p.json_string, n_json, i);
      i = e - 1;
    } else if (c == '[' || c == '{' ||
               ((std::isdigit(static_cast<unsigned char>(c)) || std::strchr("-tfn", c)) &&
                (i == begin || !std::isalnum(static_cast<unsigned char>(s[i - 1]))))) {
      take(p.value, n_value, i);
    }
  }
  return p;
}

// `unit` repeated `n` times, joined by `sep`.
inline std::string repeated(std::string_view unit, size_t n, std::string_view sep = {}) {
  std::string out;
  out.reserve(n * (unit.size() + sep.size()));
  for (size_t i = 0; i < n; ++i) {
    if (i) out += sep;
    out += unit;
  }
  return out;
}

// One structural mutation of the JSON in text[begin, end), the result at
// most max_size bytes; false when it found nothing to edit or no room.
inline bool mutate_json_text(std::string& text, size_t begin, size_t end, size_t max_size, Rng& rng) {
  if (begin >= end || text.size() >= max_size) return false;
  const size_t room = max_size - text.size();
  const Picks p = pick_positions(text, begin, end, rng);
  const std::string_view s = text;
  const auto replace = [&](size_t b, size_t e, const std::string& with) {
    if (with.size() > room + (e - b)) return false;
    text.replace(b, e - b, with);
    return true;
  };
  switch (rng() % 8) {
    case 0:    // wrap a value in n arrays
    case 1: {  // or in n objects
      if (p.value == kNpos) return false;
      const size_t e = value_end(s.substr(0, end), p.value);
      if (e == kNpos) return false;
      const bool arrays = rng() % 2;
      const std::string_view open = arrays ? "[" : "{\"a\":", close = arrays ? "]" : "}";
      const size_t n = pick_count(rng, room / (open.size() + close.size()));
      if (n == 0) return false;
      return replace(p.value, e, repeated(open, n) + std::string(s.substr(p.value, e - p.value)) + repeated(close, n));
    }
    case 2: {  // an array of n copies of a value
      if (p.value == kNpos) return false;
      const size_t e = value_end(s.substr(0, end), p.value);
      if (e == kNpos) return false;
      const std::string v(s.substr(p.value, e - p.value));
      const size_t n = pick_count(rng, (room + v.size()) / (v.size() + 1));
      if (n == 0) return false;
      return replace(p.value, e, "[" + repeated(v, n, ",") + "]");
    }
    case 3: {  // grow a string (value or key) by n units inserted after its first quote
      if (p.string == kNpos) return false;
      static constexpr std::array<std::string_view, 9> kUnits{
          "a", " ", "\\\\", "\\\"", "\\u0000", "\\ud800", "\xC3\xA9", "\xF0\x9F\x98\x80", "\\n"};
      const std::string_view unit = kUnits[rng() % kUnits.size()];
      const size_t n = pick_count(rng, room / unit.size());
      if (n == 0) return false;
      text.insert(p.string + 1, repeated(unit, n));
      return true;
    }
    case 4: {  // repeat an object member n times (duplicate keys)
      if (p.key == kNpos) return false;
      size_t v = value_end(s.substr(0, end), p.key);
      while (v < end && s[v] != ':') ++v;
      ++v;
      while (v < end && std::strchr(" \t\r\n", s[v])) ++v;
      if (v >= end) return false;
      const size_t e = value_end(s.substr(0, end), v);
      if (e == kNpos) return false;
      const std::string member = "," + std::string(s.substr(p.key, e - p.key));
      const size_t n = pick_count(rng, room / member.size());
      if (n == 0) return false;
      text.insert(e, repeated(member, n));
      return true;
    }
    case 5: {  // a value replaced by an edge literal
      if (p.value == kNpos) return false;
      const size_t e = value_end(s.substr(0, end), p.value);
      if (e == kNpos) return false;
      static constexpr std::array<std::string_view, 14> kLiterals{
          "1e999", "-1e-999", "18446744073709551616", "-9223372036854775809", "0.30000000000000004", "-0",
          "1E+2", "null", "true", "\"\"", "[]", "{}", "\"\\u0000\"", "\"\\udfff\""};
      return replace(p.value, e, std::string(kLiterals[rng() % kLiterals.size()]));
    }
    case 6: {  // the JSON text inside a string (OpenAI's tool-call arguments), mutated in turn
      if (p.json_string == kNpos) return false;
      const size_t e = value_end(s.substr(0, end), p.json_string);
      std::string inner;  // unescaped; a string with escapes other than \" and \\ is left alone
      for (size_t i = p.json_string + 1; i + 1 < e; ++i) {
        if (s[i] == '\\' && s[i + 1] != '"' && s[i + 1] != '\\') return false;
        if (s[i] == '\\') ++i;
        inner += s[i];
      }
      if (!mutate_json_text(inner, 0, inner.size(), inner.size() + room / 2, rng)) return false;
      std::string quoted = "\"";
      for (const char c : inner) {
        if (c == '"' || c == '\\') quoted += '\\';
        quoted += c;
      }
      return replace(p.json_string, e, quoted + '"');
    }
    default: {  // a value replaced by a copy of another value of the text
      const Picks q = pick_positions(text, begin, end, rng);
      if (p.value == kNpos || q.value == kNpos) return false;
      const size_t e = value_end(s.substr(0, end), p.value), qe = value_end(s.substr(0, end), q.value);
      if (e == kNpos || qe == kNpos) return false;
      return replace(p.value, e, std::string(s.substr(q.value, qe - q.value)));
    }
  }
}

// The first request's body in a raw HTTP input framed by Content-Length: the
// body [body, body + length) (cut at the input's end) and the header value's
// digits [digits, digits_end). found is false without one.
struct HttpBody {
  bool found = false;
  size_t digits = 0, digits_end = 0, body = 0, length = 0;
};

inline HttpBody find_http_body(std::string_view in) {
  HttpBody h;
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == kNpos) return h;
  constexpr std::string_view kName = "\r\ncontent-length:";
  for (size_t i = 0; i + kName.size() <= head_end; ++i) {
    size_t k = 0;
    while (k < kName.size() && std::tolower(static_cast<unsigned char>(in[i + k])) == kName[k]) ++k;
    if (k < kName.size()) continue;
    size_t d = i + k;
    while (d < head_end && in[d] == ' ') ++d;
    size_t de = d, length = 0;
    for (; de < head_end && std::isdigit(static_cast<unsigned char>(in[de])); ++de)
      length = std::min<size_t>(length * 10 + static_cast<size_t>(in[de] - '0'), size_t{1} << 40);
    if (de == d) return h;
    h = {true, d, de, head_end + 4, std::min(length, in.size() - (head_end + 4))};
    return h;
  }
  return h;
}

// The custom mutator (see the top of this file).
inline size_t mutate_json_input(uint8_t* data, size_t size, size_t max_size, unsigned seed, Framing framing) {
  Rng rng(seed);
  std::string text(reinterpret_cast<const char*>(data), size);
  const bool structural = rng() % 100 < kStructuralPercent;
  bool changed = false;
  switch (framing) {
    case Framing::Whole:
      if (structural) changed = mutate_json_text(text, 0, text.size(), max_size, rng);
      break;
    case Framing::Lines: {
      if (!structural || text.empty() || static_cast<unsigned char>(text[0]) == 0xFF) break;  // 0xFF: raw frames
      const size_t lines = 1 + static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
      size_t b = 0;
      for (size_t k = uniform(rng, 0, lines - 1); k > 0; --k) b = text.find('\n', b) + 1;
      const size_t e = std::min(text.find('\n', b), text.size());
      changed = mutate_json_text(text, b, e, max_size, rng);
      break;
    }
    case Framing::HttpBody: {
      const HttpBody h = find_http_body(text);
      if (!h.found || (!structural && rng() % 2)) break;
      std::string body = text.substr(h.body, h.length);
      const size_t fixed = text.size() - body.size() - (h.digits_end - h.digits);
      if (fixed + 9 >= max_size) break;
      const size_t body_max = max_size - fixed - std::to_string(max_size).size();
      if (body_max < h.length) break;
      if (structural) {
        changed = mutate_json_text(body, 0, body.size(), body_max, rng);
      } else {
        body.resize(body_max);
        body.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(body.data()), h.length, body_max));
        changed = true;
      }
      if (changed)
        text = text.substr(0, h.digits) + std::to_string(body.size()) +
               text.substr(h.digits_end, h.body - h.digits_end) + body + text.substr(h.body + h.length);
      break;
    }
  }
  if (!changed || text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

}  // namespace nexus::fuzz
