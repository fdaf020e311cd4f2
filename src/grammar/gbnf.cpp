#include "grammar/gbnf.h"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "grammar/utf8_classes.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace nexus::grammar {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Grammar run() {
    skip_space(true);
    while (pos_ < s_.size()) {
      const std::string name = parse_name();
      skip_space(false);
      if (s_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'");
      pos_ += 3;
      const uint32_t id = rule_id(name);
      if (defined_.count(id)) fail("rule '" + name + "' is defined twice");
      defined_[id] = true;
      g_.rules[id].alternatives = parse_alternatives(0);
      skip_space(true);
    }
    for (const auto& [name, id] : ids_)
      if (!defined_.count(id)) throw Error(fmt::format("grammar: rule '{}' is used but never defined", name));
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw Error("grammar: no 'root' rule");
    g_.root = root->second;
    check(g_);
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(fmt::format("grammar: {} (line {}, column {})", what, line, col));
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  // Spaces and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (!at_end() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  // After a newline, does the definition go on (a line starting with '|')?
  bool continues_on_next_line() {
    size_t p = pos_;
    while (p < s_.size()) {
      const char c = s_[p];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++p;
      } else if (c == '#') {
        while (p < s_.size() && s_[p] != '\n') ++p;
      } else {
        break;
      }
    }
    if (p < s_.size() && s_[p] == '|') {
      pos_ = p;
      return true;
    }
    return false;
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = g_.add_rule(name);
    ids_[name] = id;
    return id;
  }

  uint32_t helper_rule(std::vector<Sequence> alts) {
    const uint32_t id = g_.add_rule(fmt::format("_{}", g_.rules.size()));
    g_.rules[id].alternatives = std::move(alts);
    count(0);
    return id;
  }

  void count(size_t elements) {
    elements_ += elements + 1;
    if (elements_ > kMaxElements) fail(fmt::format("the grammar expands to more than {} elements", kMaxElements));
  }

  std::vector<Sequence> parse_alternatives(int depth) {
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(depth));
    for (;;) {
      skip_space(depth > 0);
      if (peek() == '|' || (depth == 0 && (peek() == '\n' || peek() == '\r') && continues_on_next_line())) {
        ++pos_;
        alts.push_back(parse_sequence(depth));
        continue;
      }
      break;
    }
    return alts;
  }

  Sequence parse_sequence(int depth) {
    Sequence seq;
    for (;;) {
      skip_space(depth > 0);
      const char c = peek();
      if (at_end() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
      // A new definition starts: `name ::=` (only where a newline was allowed).
      Sequence atom = parse_atom(depth);
      skip_space(false);
      atom = parse_repetition(std::move(atom));
      count(atom.size());
      seq.insert(seq.end(), atom.begin(), atom.end());
    }
    return seq;
  }

  // One atom as a sequence of elements (a literal is several).
  Sequence parse_atom(int depth) {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return class_elements(normalize({{0, 0x10FFFF}}));
    }
    if (c == '(') {
      // Groups are parsed recursively: their nesting is bounded (util/json_depth.h's limit).
      if (depth + 1 > max_json_depth()) fail(fmt::format("groups nested more than {} levels deep", max_json_depth()));
      ++pos_;
      std::vector<Sequence> alts = parse_alternatives(depth + 1);
      skip_space(true);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      return {Element{Element::Rule, helper_rule(std::move(alts))}};
    }
    if (name_char(c)) {
      const size_t save = pos_;
      const std::string name = parse_name();
      skip_space(false);
      if (s_.substr(pos_, 3) == "::=") {
        pos_ = save;
        fail("expected a newline before the definition of '" + name + "'");
      }
      return {Element{Element::Rule, rule_id(name)}};
    }
    fail(fmt::format("unexpected character '{}'", c));
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else fail("expected a hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // One code point of a literal or class (UTF-8 decoded, or an escape).
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of the grammar");
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: --pos_; fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || pos_ + n > s_.size()) fail("invalid UTF-8 in the grammar");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto cc = static_cast<unsigned char>(s_[pos_ + i]);
      if ((cc & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (cc & 0x3F);
    }
    pos_ += n;
    return cp;
  }

  Sequence parse_literal() {
    ++pos_;  // "
    Sequence seq;
    while (peek() != '"') {
      if (at_end() || peek() == '\n') fail("unterminated string literal");
      const uint32_t cp = parse_char();
      const auto seqs = utf8_sequences(normalize({{cp, cp}}));
      if (seqs.empty()) fail(fmt::format("code point U+{:04X} cannot be encoded in UTF-8", cp));
      for (const ByteSet& b : seqs[0]) seq.push_back(Element{Element::Bytes, g_.add_set(b)});
    }
    ++pos_;
    return seq;
  }

  Sequence class_elements(const std::vector<CodeRange>& ranges) {
    const auto seqs = utf8_sequences(ranges);
    if (seqs.empty()) fail("the character class matches nothing");
    if (seqs.size() == 1 && seqs[0].size() == 1) return {Element{Element::Bytes, g_.add_set(seqs[0][0])}};
    std::vector<Sequence> alts;
    for (const auto& bytes : seqs) {
      Sequence s;
      for (const ByteSet& b : bytes) s.push_back(Element{Element::Bytes, g_.add_set(b)});
      count(s.size());
      alts.push_back(std::move(s));
    }
    return {Element{Element::Rule, helper_rule(std::move(alts))}};
  }

  Sequence parse_class() {
    ++pos_;  // [
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    std::vector<CodeRange> ranges;
    while (peek() != ']') {
      if (at_end()) fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("a character range goes backwards");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    std::vector<CodeRange> n = normalize(std::move(ranges));
    return class_elements(negated ? complement(n) : n);
  }

  std::optional<int> parse_int() {
    const size_t start = pos_;
    long v = 0;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_] - '0');
      if (v > kMaxRepeat) fail(fmt::format("a repetition bound above {}", kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<int>(v);
  }

  Sequence parse_repetition(Sequence atom) {
    int lo = 1, hi = 1;  // hi < 0: unbounded
    const char c = peek();
    if (c == '*') lo = 0, hi = -1;
    else if (c == '+') lo = 1, hi = -1;
    else if (c == '?') lo = 0, hi = 1;
    else if (c == '{') {
      ++pos_;
      skip_space(false);
      const auto m = parse_int();
      if (!m) fail("expected a number after '{'");
      lo = hi = *m;
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        const auto n = parse_int();
        hi = n ? *n : -1;
        if (n && *n < lo) fail("a repetition's maximum is below its minimum");
      }
      skip_space(false);
      if (peek() != '}') fail("expected '}'");
    } else {
      return atom;
    }
    ++pos_;
    skip_space(false);
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') fail("a repetition of a repetition");
    // The atom as one element (a literal of several bytes gets a rule).
    const Element x = atom.size() == 1 ? atom[0] : Element{Element::Rule, helper_rule({atom})};
    Sequence out(static_cast<size_t>(lo), x);
    if (hi < 0) {  // x* : R ::= x R | ε
      const uint32_t r = g_.add_rule(fmt::format("_{}", g_.rules.size()));
      g_.rules[r].alternatives = {{x, Element{Element::Rule, r}}, {}};
      count(2);
      out.push_back(Element{Element::Rule, r});
    } else if (hi > lo) {  // (x (x (...)?)?)? nested, hi - lo deep
      uint32_t inner = helper_rule({{x}, {}});
      for (int i = 1; i < hi - lo; ++i) inner = helper_rule({{x, Element{Element::Rule, inner}}, {}});
      out.push_back(Element{Element::Rule, inner});
    }
    count(out.size());
    return out;
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t elements_ = 0;
  Grammar g_;
  std::map<std::string, uint32_t> ids_;
  std::map<uint32_t, bool> defined_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace nexus::grammar
