#include "grammar/schema_pattern.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "grammar/utf8_classes.h"
#include "util/error.h"

namespace nexus::grammar {
namespace {

using Ranges = std::vector<CodeRange>;

// A compiled piece: its GBNF, whether it matches the empty string, and its
// weight (characters, each quantified part counted as often as it repeats).
struct Frag {
  std::string g;
  bool nullable = true;
  long weight = 0;
};

const Ranges& digit_set() {
  static const Ranges k = {{'0', '9'}};
  return k;
}
const Ranges& word_set() {
  static const Ranges k = normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
  return k;
}
const Ranges& space_set() {  // ECMA-262 WhiteSpace and LineTerminator
  static const Ranges k = normalize({{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                     {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                                     {0xFEFF, 0xFEFF}});
  return k;
}
const Ranges& dot_set() {
  static const Ranges k = complement(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
  return k;
}

bool contains(const Ranges& r, uint32_t c) {
  for (const auto& [lo, hi] : r)
    if (lo <= c && c <= hi) return true;
  return false;
}

// A code point as a GBNF literal / class character.
std::string gchar(uint32_t c) {
  if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) return std::string(1, char(c));
  if (c < 0x80) return fmt::format("\\x{:02X}", c);
  return fmt::format("\\U{:08X}", c);
}

// The JSON spellings of the characters of a set (normalized), as GBNF.
std::string json_chars(const Ranges& set) {
  std::vector<std::string> alts;
  Ranges plain;
  for (const CodeRange& r : set) {
    // Split off the characters JSON escapes: U+0000-U+001F, '"', '\'.
    const uint32_t lo = r.first, hi = r.second;
    auto keep = [&](uint32_t a, uint32_t b) {
      a = std::max(a, lo);
      b = std::min(b, hi);
      if (a <= b) plain.emplace_back(a, b);
    };
    keep(0x20, 0x21);
    keep(0x23, 0x5B);
    keep(0x5D, 0x10FFFF);
  }
  if (plain.size() == 1 && plain[0].first == plain[0].second) {
    alts.push_back("\"" + gchar(plain[0].first) + "\"");
  } else if (!plain.empty()) {
    std::string cls = "[";
    for (auto [lo, hi] : plain) cls += lo == hi ? gchar(lo) : gchar(lo) + "-" + gchar(hi);
    alts.push_back(cls + "]");
  }
  if (contains(set, '"')) alts.push_back("\"\\\\\\\"\"");
  if (contains(set, '\\')) alts.push_back("\"\\\\\\\\\"");
  bool all_controls = true;
  for (uint32_t c = 0; c < 0x20; ++c) all_controls = all_controls && contains(set, c);
  if (all_controls) {
    alts.push_back("\"\\\\\" [bfnrt]");
    alts.push_back("\"\\\\u00\" [01] [0-9a-fA-F]");
  } else {
    for (uint32_t c = 0; c < 0x20; ++c) {
      if (!contains(set, c)) continue;
      const char* shorts = "btn_fr";
      if (c >= 8 && c <= 13 && shorts[c - 8] != '_') alts.push_back(fmt::format("\"\\\\{}\"", shorts[c - 8]));
      const unsigned lo = c & 0xF;
      alts.push_back(lo < 10 ? fmt::format("\"\\\\u00{}{}\"", c >> 4, lo)
                             : fmt::format("\"\\\\u00{}\" [{}{}]", c >> 4, char('a' + lo - 10), char('A' + lo - 10)));
    }
  }
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

class Compiler {
 public:
  Compiler(const std::string& pattern, const std::string& where) : src_(pattern), where_(where) { decode(); }

  std::string run() {
    std::vector<std::string> alts;
    long weight = 0;
    for (;;) {
      // One top-level alternative, its anchors read here.
      const bool start = peek() == '^';
      if (start) ++i_;
      Frag f = sequence(0);
      bool end = false;
      if (peek() == '$') {
        ++i_;
        end = true;
      }
      if (!at_end() && peek() != '|') {
        if (peek() == ')') invalid("unmatched ')'");
        unsupported(fmt::format("the anchor '{}' other than at the start or end", char(peek())));
      }
      weight += f.weight;
      std::string g = f.g;
      if (!start) g = "json-char* " + g;
      if (!end) g = g + " json-char*";
      alts.push_back(g);
      if (at_end()) break;
      ++i_;  // |
    }
    check_weight(weight);
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
    return out + " )";
  }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(fmt::format("{}: 'pattern' {}: {} (at character {}) is not supported", where_,
                            nlohmann::json(src_).dump(), what, i_ + 1));
  }
  [[noreturn]] void invalid(const std::string& what) const {
    throw Error(fmt::format("{}: 'pattern' {} is not a valid regular expression: {} (at character {})", where_,
                            nlohmann::json(src_).dump(), what, i_ + 1));
  }
  void check_weight(long w) const {
    if (w > kPatternMaxWeight)
      unsupported(fmt::format("an expansion above {} characters (repetition counts multiply)", kPatternMaxWeight));
  }

  void decode() {
    size_t i = 0;
    while (i < src_.size()) {
      const auto c = static_cast<unsigned char>(src_[i]);
      const int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      if (n == 0 || i + n > src_.size()) invalid("invalid UTF-8");
      uint32_t cp = n == 1 ? c : c & (0x7F >> n);
      for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(src_[i + k]) & 0x3F);
      p_.push_back(cp);
      i += n;
    }
  }

  bool at_end() const { return i_ >= p_.size(); }
  uint32_t peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : 0; }

  Frag alternation(int depth) {
    std::vector<Frag> alts;
    alts.push_back(sequence(depth));
    while (peek() == '|' && !at_end()) {
      ++i_;
      alts.push_back(sequence(depth));
    }
    if (alts.size() == 1) return alts[0];
    Frag out;
    out.nullable = false;
    out.g = "(";
    for (size_t i = 0; i < alts.size(); ++i) {
      out.g += (i ? " | " : " ") + alts[i].g;
      out.nullable = out.nullable || alts[i].nullable;
      out.weight += alts[i].weight;
    }
    out.g += " )";
    return out;
  }

  Frag sequence(int depth) {
    Frag out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && depth == 0 && (i_ + 1 == p_.size() || peek(1) == '|')) break;
      Frag f = quantified(depth);
      if (!f.g.empty()) out.g += (out.g.empty() ? "" : " ") + f.g;
      out.nullable = out.nullable && f.nullable;
      out.weight += f.weight;
      check_weight(out.weight);
    }
    return out;
  }

  // {n}, {n,}, {n,m} at i_: the bounds (hi -1: none) and the length, or
  // nullopt when the text is not a quantifier (then '{' is a literal).
  std::optional<std::pair<std::pair<long, long>, size_t>> brace_quantifier() const {
    size_t j = i_ + 1;
    auto number = [&](long& v) {
      const size_t start = j;
      v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        v = std::min<long>(v * 10 + (p_[j] - '0'), 1L << 40);
        ++j;
      }
      return j > start;
    };
    long lo = 0, hi = 0;
    if (!number(lo)) return std::nullopt;
    hi = lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(hi)) hi = -1;
    }
    if (j >= p_.size() || p_[j] != '}') return std::nullopt;
    return std::make_pair(std::make_pair(lo, hi), j + 1 - i_);
  }

  bool quantifier_here() const {
    const uint32_t c = peek();
    return !at_end() && (c == '*' || c == '+' || c == '?' || (c == '{' && brace_quantifier()));
  }

  Frag quantified(int depth) {
    if (quantifier_here()) invalid("nothing to repeat");
    Frag f = atom(depth);
    if (!quantifier_here()) return f;
    long lo = 0, hi = -1;
    const uint32_t c = peek();
    if (c == '*') lo = 0, hi = -1, ++i_;
    else if (c == '+') lo = 1, hi = -1, ++i_;
    else if (c == '?') lo = 0, hi = 1, ++i_;
    else {
      const auto q = *brace_quantifier();
      lo = q.first.first;
      hi = q.first.second;
      if (hi >= 0 && hi < lo) invalid("numbers out of order in a {} quantifier");
      if (lo > kPatternMaxRepeat || hi > kPatternMaxRepeat)
        unsupported(fmt::format("a repetition count above {}", kPatternMaxRepeat));
      i_ += q.second;
    }
    if (peek() == '?' && !at_end()) unsupported("a lazy quantifier");
    if (quantifier_here()) invalid("nothing to repeat");
    // (x?){n} and (x*)* follow many equivalent parses at once (their cost
    // grows with the square of the count, or never ends): refused.
    if (f.nullable && !f.g.empty() && (hi < 0 || hi > 1))
      unsupported("a repetition (other than '?') of a part that can match the empty string");
    Frag out;
    out.nullable = f.nullable || lo == 0;
    out.weight = f.weight * std::max<long>(hi < 0 ? lo : hi, 1);
    check_weight(out.weight);
    if (f.g.empty() || hi == 0) return out;  // matches only the empty string
    // One GBNF atom (a literal or a class) takes the quantifier as it is.
    const bool atom = f.g.find(' ') == std::string::npos && (f.g.back() == '"' || f.g.back() == ']');
    const std::string x = atom ? f.g : "( " + f.g + " )";
    if (lo == 0 && hi < 0) out.g = x + "*";
    else if (lo == 1 && hi < 0) out.g = x + "+";
    else if (lo == 0 && hi == 1) out.g = x + "?";
    else if (hi < 0) out.g = fmt::format("{}{{{},}}", x, lo);
    else if (lo == hi) out.g = fmt::format("{}{{{}}}", x, lo);
    else out.g = fmt::format("{}{{{},{}}}", x, lo, hi);
    return out;
  }

  Frag chars(const Ranges& set) {
    const Ranges n = normalize(set);
    if (n.empty()) unsupported("a character class that matches no character");
    return Frag{json_chars(n), false, 1};
  }

  Frag atom(int depth) {
    const uint32_t c = peek();
    if (c == '(') {
      if (depth + 1 > kPatternMaxDepth) unsupported(fmt::format("groups nested deeper than {}", kPatternMaxDepth));
      ++i_;
      if (peek() == '?') {
        if (peek(1) == ':') {
          i_ += 2;
        } else if (peek(1) == '=' || peek(1) == '!' || (peek(1) == '<' && (peek(2) == '=' || peek(2) == '!'))) {
          unsupported("a lookaround assertion");
        } else if (peek(1) == '<') {  // (?<name>
          size_t j = i_ + 2;
          while (j < p_.size() && p_[j] != '>') ++j;
          if (j >= p_.size() || j == i_ + 2) invalid("a bad group name");
          i_ = j + 1;
        } else {
          invalid("an unknown group '(?'");
        }
      }
      Frag f = alternation(depth + 1);
      if (peek() != ')' || at_end()) invalid("a '(' without its ')'");
      ++i_;
      return f;
    }
    if (c == '^' || c == '$') unsupported(fmt::format("the anchor '{}' other than at the start or end", char(c)));
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return chars(dot_set());
    }
    if (c == '\\') {
      ++i_;
      if (at_end()) invalid("'\\' at the end");
      const uint32_t e = peek();
      if (e == 'b' || e == 'B') unsupported(fmt::format("the word-boundary assertion '\\{}'", char(e)));
      if (e >= '1' && e <= '9') unsupported("a backreference");
      if (e == 'k') unsupported("a named backreference '\\k'");
      if (const Ranges* s = class_escape()) return chars(*s);
      const uint32_t cp = char_escape();
      return chars({{cp, cp}});
    }
    if (c == ')') invalid("unmatched ')'");
    ++i_;
    return chars({{c, c}});
  }

  // \d \D \w \W \s \S at i_ (after the '\'): their set, consumed; else null.
  const Ranges* class_escape() {
    static const Ranges not_digit = complement(digit_set()), not_word = complement(word_set()),
                        not_space = complement(space_set());
    const Ranges* s = nullptr;
    switch (peek()) {
      case 'd': s = &digit_set(); break;
      case 'D': s = &not_digit; break;
      case 'w': s = &word_set(); break;
      case 'W': s = &not_word; break;
      case 's': s = &space_set(); break;
      case 'S': s = &not_space; break;
      default: return nullptr;
    }
    ++i_;
    return s;
  }

  uint32_t hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const uint32_t c = peek();
      int d;
      if (c >= '0' && c <= '9') d = int(c - '0');
      else if (c >= 'a' && c <= 'f') d = int(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = int(c - 'A' + 10);
      else invalid("expected a hex digit");
      v = v * 16 + uint32_t(d);
      ++i_;
    }
    return v;
  }

  // A character escape at i_ (after the '\'), consumed: its code point.
  uint32_t char_escape() {
    const uint32_t e = peek();
    ++i_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'v': return 0x0B;
      case 'f': return 0x0C;
      case '0':
        if (peek() >= '0' && peek() <= '9') unsupported("an octal escape");
        return 0;
      case 'x': return hex(2);
      case 'c': {
        const uint32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) invalid("'\\c' without a letter");
        ++i_;
        return l % 32;
      }
      case 'u': {
        if (peek() == '{') {
          ++i_;
          uint32_t v = 0;
          size_t n = 0;
          while (peek() != '}') {
            if (at_end() || n++ > 6) invalid("a bad '\\u{...}' escape");
            v = v * 16 + hex(1);
          }
          ++i_;
          if (n == 0 || v > 0x10FFFF) invalid("a bad '\\u{...}' escape");
          return v;
        }
        uint32_t v = hex(4);
        if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {  // a surrogate pair
          const size_t save = i_;
          i_ += 2;
          const uint32_t low = hex(4);
          if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
          i_ = save;
        }
        return v;
      }
      case 'p': case 'P': --i_; unsupported(fmt::format("the Unicode property escape '\\{}'", char(e)));
      default:
        if (e < 0x80 && !((e >= '0' && e <= '9') || (e >= 'A' && e <= 'Z') || (e >= 'a' && e <= 'z') || e == '_'))
          return e;  // an identity escape: \. \* \/ \- ...
        --i_;
        unsupported(fmt::format("the escape '\\{}'", e < 0x80 ? std::string(1, char(e)) : "..."));
    }
  }

  Frag char_class() {
    ++i_;  // [
    const bool negated = peek() == '^' && !at_end();
    if (negated) ++i_;
    Ranges set;
    // One class atom: a set (\d ...) or a character.
    auto class_atom = [&](Ranges& set_out) -> std::optional<uint32_t> {
      if (peek() != '\\') return p_[i_++];
      ++i_;
      if (at_end()) invalid("'\\' at the end");
      if (peek() == 'b') {
        ++i_;
        return 0x08;
      }
      if (peek() == '-') {
        ++i_;
        return '-';
      }
      if (peek() >= '1' && peek() <= '9') unsupported("a backreference");
      if (peek() == 'k') unsupported("a named backreference '\\k'");
      if (const Ranges* s = class_escape()) {
        set_out = *s;
        return std::nullopt;
      }
      return char_escape();
    };
    while (peek() != ']' || at_end()) {
      if (at_end()) invalid("a '[' without its ']'");
      Ranges s1, s2;
      const auto a = class_atom(s1);
      if (peek() == '-' && i_ + 1 < p_.size() && peek(1) != ']') {
        ++i_;
        const auto b = class_atom(s2);
        if (!a || !b) unsupported("a class range with '\\d', '\\w' or '\\s' at an end");
        if (*b < *a) invalid("a class range out of order");
        set.emplace_back(*a, *b);
      } else if (a) {
        set.emplace_back(*a, *a);
      } else {
        set.insert(set.end(), s1.begin(), s1.end());
      }
    }
    ++i_;  // ]
    const Ranges n = normalize(std::move(set));
    return chars(negated ? complement(n) : n);
  }

  std::string src_, where_;
  std::vector<uint32_t> p_;
  size_t i_ = 0;
};

}  // namespace

std::string pattern_to_gbnf(const std::string& pattern, const std::string& where) {
  return Compiler(pattern, where).run();
}

}  // namespace nexus::grammar
