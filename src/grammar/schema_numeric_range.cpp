#include "grammar/schema_numeric_range.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <vector>

#include "util/error.h"

namespace nexus::grammar {
namespace {

using json = nlohmann::ordered_json;
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

constexpr double kTwo64 = 18446744073709551616.0;  // 2^64

std::string to_string(u128 v) {
  if (v == 0) return "0";
  char buf[48];
  size_t n = sizeof buf;
  while (v > 0) {
    buf[--n] = static_cast<char>('0' + static_cast<int>(v % 10));
    v /= 10;
  }
  return std::string(buf + n, sizeof buf - n);
}

std::string join(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

std::string digit(char d) { return fmt::format("\"{}\"", d); }
std::string digits(char a, char b) { return a == b ? digit(a) : fmt::format("[{}-{}]", a, b); }
std::string any_digits(size_t n) {  // exactly n digits
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}
std::string seq(const std::string& a, const std::string& b) { return b.empty() ? a : a.empty() ? b : a + " " + b; }

// The decimal strings from x to y (same length, x <= y), digit by digit.
std::string same_length(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  if (n == 0) return "";
  if (x[0] == y[0]) return seq(digit(x[0]), same_length(x.substr(1), y.substr(1)));
  const bool rest_zero = x.find_first_not_of('0', 1) == std::string::npos;
  const bool rest_nine = y.find_first_not_of('9', 1) == std::string::npos;
  std::vector<std::string> alts;
  if (!rest_zero) alts.push_back(seq(digit(x[0]), same_length(x.substr(1), std::string(n - 1, '9'))));
  const char lo = static_cast<char>(x[0] + (rest_zero ? 0 : 1)), hi = static_cast<char>(y[0] - (rest_nine ? 0 : 1));
  if (lo <= hi) alts.push_back(seq(digits(lo, hi), any_digits(n - 1)));
  if (!rest_nine) alts.push_back(seq(digit(y[0]), same_length(std::string(n - 1, '0'), y.substr(1))));
  return join(alts);
}

// The integers lo..hi (hi absent: no end) in decimal without leading zeros.
std::string nonneg_range(u128 lo, std::optional<u128> hi) {
  const std::string a = to_string(lo);
  const size_t la = a.size();
  const size_t lb = hi ? to_string(*hi).size() : 0;
  std::vector<std::string> alts;
  if (hi && lb == la) return same_length(a, to_string(*hi));
  alts.push_back(same_length(a, std::string(la, '9')));
  if (!hi) {
    alts.push_back(fmt::format("[1-9] [0-9]{{{},}}", la));
  } else {
    if (lb > la + 1) alts.push_back(lb - 2 == la ? seq("[1-9]", any_digits(la)) : fmt::format("[1-9] [0-9]{{{},{}}}", la, lb - 2));
    std::string first(lb, '0');
    first[0] = '1';
    alts.push_back(same_length(first, to_string(*hi)));
  }
  return join(alts);
}

// Non-negative magnitudes m with A <= m (A < m when a_excl) and m <= B (m < B
// when b_excl; no B: no end). Integers: the bounds are made inclusive and m
// has no fraction. Numbers: m is "I" or "I.F"; A and B are whole.
// Returns the alternatives (none when the range is empty).
std::vector<std::string> magnitudes(u128 a, bool a_excl, std::optional<u128> b, bool b_excl, bool integer) {
  std::vector<std::string> alts;
  if (integer) {
    if (a_excl) ++a;
    if (b && b_excl) {
      if (*b == 0) return alts;
      --*b;
    }
    if (b && *b < a) return alts;
    alts.push_back(nonneg_range(a, b));
    return alts;
  }
  const std::string any_frac = "( \".\" [0-9]+ )?";
  const std::string nonzero_frac = "\".\" \"0\"* [1-9] [0-9]*";
  const std::string zero_frac = "( \".\" \"0\"+ )?";
  if (b && (*b < a || (*b == a && (a_excl || b_excl)))) return alts;
  if (b && *b == a) {  // exactly a
    alts.push_back(seq(to_string(a) == "0" ? digit('0') : fmt::format("\"{}\"", to_string(a)), zero_frac));
    return alts;
  }
  // Here a < b (or no b). Integer parts with any fraction: first..last.
  const u128 first = a_excl ? a + 1 : a;
  if (a_excl) alts.push_back(seq(fmt::format("\"{}\"", to_string(a)), nonzero_frac));
  if (!b) {
    alts.push_back(seq(nonneg_range(first, std::nullopt), any_frac));
    return alts;
  }
  const u128 last = *b - 1;  // b > a >= 0
  if (first <= last) alts.push_back(seq(nonneg_range(first, last), any_frac));
  if (!b_excl) alts.push_back(seq(fmt::format("\"{}\"", to_string(*b)), zero_frac));
  return alts;
}

struct Bound {
  i128 v = 0;
  bool excl = false;
  const char* key = nullptr;  // the keyword that set it
  std::string text;           // its value as written
};

// The bound `key` as an integer (rounded inward for "integer", refused when
// fractional for "number"), or nullopt when absent.
std::optional<Bound> read_bound(const json& s, const char* key, bool lower, bool excl, bool integer,
                                const std::string& where) {
  const auto it = s.find(key);
  if (it == s.end()) return std::nullopt;
  const json& v = *it;
  Bound b;
  b.key = key;
  b.text = v.dump();
  b.excl = excl;
  if (v.is_boolean() && excl)
    throw Error(fmt::format("{}: '{}' must be a number (the draft-04 boolean form is not supported)", where, key));
  if (!v.is_number()) throw Error(fmt::format("{}: '{}' must be a number, not {}", where, key, b.text));
  if (v.is_number_unsigned()) {
    b.v = static_cast<i128>(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    b.v = static_cast<i128>(v.get<int64_t>());
  } else {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) >= kTwo64)
      throw Error(fmt::format("{}: '{}' {} is beyond +-(2^64 - 1), which is not supported", where, key, b.text));
    const double whole = lower ? std::ceil(d) : std::floor(d);
    if (whole != d) {
      if (!integer)
        throw Error(fmt::format("{}: '{}' {} on type 'number' is not supported: only whole-number bounds are "
                                "(an exact fractional bound is not compiled)",
                                where, key, b.text));
      b.excl = false;  // rounded inward: the rounded value itself is in range
    }
    b.v = whole < 0 ? -static_cast<i128>(static_cast<u128>(-whole)) : static_cast<i128>(static_cast<u128>(whole));
  }
  if (b.v >= static_cast<i128>(kTwo64) || b.v <= -static_cast<i128>(kTwo64))
    throw Error(fmt::format("{}: '{}' {} is beyond +-(2^64 - 1), which is not supported", where, key, b.text));
  return b;
}

// The stricter of two lower (or upper) bounds.
std::optional<Bound> stricter(std::optional<Bound> x, std::optional<Bound> y, bool lower) {
  if (!x) return y;
  if (!y) return x;
  if (x->v != y->v) return (x->v > y->v) == lower ? x : y;
  return x->excl ? x : y;
}

}  // namespace

std::string numeric_range_gbnf(const json& s, bool integer, const std::string& where) {
  const auto lo = stricter(read_bound(s, "minimum", true, false, integer, where),
                           read_bound(s, "exclusiveMinimum", true, true, integer, where), true);
  const auto hi = stricter(read_bound(s, "maximum", false, false, integer, where),
                           read_bound(s, "exclusiveMaximum", false, true, integer, where), false);
  if (!lo && !hi) return "";
  std::vector<std::string> alts;
  // Negative values -m: m > 0, m <= -lo (m < -lo when lo is exclusive), m >=
  // -hi when hi < 0 (m > -hi when hi is exclusive).
  if (!lo || lo->v < 0) {
    const bool hi_neg = hi && hi->v < 0;
    const u128 a = hi_neg ? static_cast<u128>(-hi->v) : 0;
    const bool a_excl = hi_neg ? hi->excl : true;
    std::optional<u128> b;
    if (lo) b = static_cast<u128>(-lo->v);
    for (const std::string& m : magnitudes(a, a_excl, b, lo && lo->excl, integer)) alts.push_back("\"-\" " + m);
  }
  // Non-negative values.
  if (!hi || hi->v > 0 || (hi->v == 0 && !hi->excl)) {
    const bool lo_pos = lo && lo->v >= 0;
    const u128 a = lo_pos ? static_cast<u128>(lo->v) : 0;
    std::optional<u128> b;
    if (hi) b = static_cast<u128>(hi->v);
    for (const std::string& m : magnitudes(a, lo_pos && lo->excl, b, hi && hi->excl, integer)) alts.push_back(m);
  }
  if (alts.empty()) {
    throw Error(fmt::format("{}: no {} satisfies '{}' {} and '{}' {}", where, integer ? "integer" : "number",
                            lo->key, lo->text, hi->key, hi->text));
  }
  return join(alts);
}

}  // namespace nexus::grammar
