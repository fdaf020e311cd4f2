#include "template/lexer.h"

#include <algorithm>
#include <array>
#include <utility>

#include "template/template_error.h"
#include "template/utf8.h"

namespace nexus::tmpl {

namespace {

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The preprocessing passes of the reference lexer (see lexer.h).
std::string preprocess(std::string_view in) {
  std::string s(in);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  // lstrip_blocks: /^[ \t]*({[#%-])/gm
  std::string a;
  a.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const bool line_start = i == 0 || s[i - 1] == '\n' || s[i - 1] == '\r';
    if (line_start) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j > i && j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        i = j;
      }
    }
    // Copy up to the next line start.
    const size_t nl = s.find_first_of("\r\n", i);
    const size_t end = nl == std::string::npos ? s.size() : nl + 1;
    a.append(s, i, end - i);
    i = end;
  }
  // trim_blocks: /([#%-]})\n/g
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    b += a[i];
    if (a[i] == '}' && i > 0 && (a[i - 1] == '#' || a[i - 1] == '%' || a[i - 1] == '-') && i + 1 < a.size() &&
        a[i + 1] == '\n') {
      ++i;  // drop the newline
    }
  }
  // {% generation %} / {% endgeneration %}: /{%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs
  std::string out;
  out.reserve(b.size());
  size_t last = 0;
  for (size_t at = b.find("{%"); at != std::string::npos; at = b.find("{%", at + 1)) {
    if (at < last) continue;
    size_t j = at + 2;
    const bool lstrip = j < b.size() && b[j] == '-';
    if (lstrip) ++j;
    while (size_t n = space_len_at(b, j)) j += n;
    if (b.compare(j, 3, "end") == 0 && b.compare(j + 3, 10, "generation") == 0) j += 3;
    if (b.compare(j, 10, "generation") != 0) continue;
    j += 10;
    while (size_t n = space_len_at(b, j)) j += n;
    const bool rstrip = j < b.size() && b[j] == '-';
    if (rstrip) ++j;
    if (b.compare(j, 2, "%}") != 0) continue;
    j += 2;
    size_t after = j;
    while (size_t n = space_len_at(b, after)) after += n;
    std::string_view kept(b.data() + last, at - last);
    if (lstrip) kept = trim_end(kept);
    out.append(kept);
    if (!rstrip) out.append(b, j, after - j);
    last = after;
  }
  out.append(b, last, std::string::npos);
  return out;
}

struct Rule {
  std::string_view seq;
  Tok type;
};

// Ordered as the reference's mapping table (longer operators first).
constexpr std::array<Rule, 30> kRules{{
    {"{%", Tok::OpenStatement}, {"%}", Tok::CloseStatement}, {"{{", Tok::OpenExpression},
    {"}}", Tok::CloseExpression}, {"(", Tok::OpenParen}, {")", Tok::CloseParen}, {"{", Tok::OpenBrace},
    {"}", Tok::CloseBrace}, {"[", Tok::OpenBracket}, {"]", Tok::CloseBracket}, {",", Tok::Comma},
    {".", Tok::Dot}, {":", Tok::Colon}, {"|", Tok::Pipe}, {"<=", Tok::Comparison}, {">=", Tok::Comparison},
    {"==", Tok::Comparison}, {"!=", Tok::Comparison}, {"<", Tok::Comparison}, {">", Tok::Comparison},
    {"+", Tok::Additive}, {"-", Tok::Additive}, {"~", Tok::Additive}, {"**", Tok::Power},
    {"*", Tok::Multiplicative}, {"//", Tok::Multiplicative}, {"/", Tok::Multiplicative},
    {"%", Tok::Multiplicative}, {"=", Tok::Equals}, {"", Tok::Text},
}};

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    const size_t n = src_.size();
    int depth = 0;  // curly brackets open inside {{ }}
    while (pos_ < n) {
      const bool after_tag = tokens_.empty() || last() == Tok::CloseStatement || last() == Tok::CloseExpression ||
                             last() == Tok::Comment;
      if (after_tag) {
        size_t end = pos_;
        for (;;) {
          end = src_.find('{', end);
          if (end == std::string::npos) {
            end = n;
            break;
          }
          const char next = end + 1 < n ? src_[end + 1] : '\0';
          if (next == '%' || next == '{' || next == '#') break;
          ++end;
        }
        if (end > pos_) {
          push(Tok::Text, src_.substr(pos_, end - pos_));
          pos_ = end;
          continue;
        }
      }
      if (src_[pos_] == '{') {
        const char next = at(pos_ + 1);
        if (next == '#') {
          pos_ += 2;
          const bool strip_before = at(pos_) == '-';
          if (strip_before) ++pos_;
          const size_t end = src_.find("#}", pos_);
          if (end == std::string::npos) fail("missing end of comment tag '#}'");
          std::string comment = src_.substr(pos_, end - pos_);
          const bool strip_after = !comment.empty() && comment.back() == '-';
          if (strip_before) strip_trailing_text();
          push(Tok::Comment, std::move(comment));
          pos_ = end + 2;
          if (strip_after) skip_space();
          continue;
        }
        if (at(pos_ + 2) == '-' && (next == '%' || next == '{')) {
          strip_trailing_text();
          push(next == '%' ? Tok::OpenStatement : Tok::OpenExpression, next == '%' ? "{%" : "{{");
          if (next == '{') depth = 0;
          pos_ += 3;
          continue;
        }
      }
      consume_space();
      const char c = src_[pos_];
      if (c == '-' && at(pos_ + 2) == '}' && (at(pos_ + 1) == '%' || at(pos_ + 1) == '}')) {
        const bool stmt = at(pos_ + 1) == '%';
        push(stmt ? Tok::CloseStatement : Tok::CloseExpression, stmt ? "%}" : "}}");
        pos_ += 3;
        skip_space();
        continue;
      }
      if (c == '-' || c == '+') {
        if (tokens_.empty() || last() == Tok::Text) fail(std::string("unexpected character '") + c + "'");
        const Tok lt = last();
        const bool binary = lt == Tok::Ident || lt == Tok::Number || lt == Tok::String || lt == Tok::CloseParen ||
                            lt == Tok::CloseBracket;
        if (!binary) {
          ++pos_;
          std::string num = digits();
          if (!num.empty() && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
            ++pos_;
            num += "." + digits();
          }
          if (num.empty()) push(Tok::Unary, std::string(1, c));
          else push(Tok::Number, std::string(1, c) + num);
          continue;
        }
      }
      if (match_rule(depth)) continue;
      if (c == '\'' || c == '"') {
        ++pos_;
        push(Tok::String, string_body(c));
        ++pos_;
        continue;
      }
      if (is_digit(c)) {
        std::string num = digits();
        if (last_is_not(Tok::Dot) && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
          ++pos_;
          num += "." + digits();
        }
        push(Tok::Number, std::move(num));
        continue;
      }
      if (is_word(c)) {
        const size_t start = pos_;
        while (pos_ < n && is_word(src_[pos_])) ++pos_;
        if (pos_ >= n) fail("unexpected end of input");
        push(Tok::Ident, src_.substr(start, pos_ - start));
        continue;
      }
      fail(std::string("unexpected character '") + c + "'");
    }
    return std::move(tokens_);
  }

 private:
  char at(size_t i) const { return i < src_.size() ? src_[i] : '\0'; }
  Tok last() const { return tokens_.back().type; }
  bool last_is_not(Tok t) const { return tokens_.empty() || last() != t; }

  // Positions only move forward: count newlines incrementally.
  int line_at(size_t p) const {
    p = std::min(p, src_.size());
    if (p < line_pos_) {
      line_pos_ = 0;
      line_ = 1;
    }
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(line_pos_),
                                         src_.begin() + static_cast<std::ptrdiff_t>(p), '\n'));
    line_pos_ = p;
    return line_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(TemplateError::Kind::Syntax, "template syntax error at line " + std::to_string(line_at(pos_)) + ": " + what);
  }
  void push(Tok t, std::string v) { tokens_.push_back(Token{t, std::move(v), line_at(pos_)}); }

  void strip_trailing_text() {
    if (!tokens_.empty() && last() == Tok::Text) {
      tokens_.back().value = std::string(trim_end(tokens_.back().value));
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }
  void skip_space() {
    while (size_t k = space_len_at(src_, pos_)) pos_ += k;
  }
  // Whitespace inside a tag; the reference fails when the input ends inside one.
  void consume_space() {
    skip_space();
    if (pos_ >= src_.size()) fail("unexpected end of input inside a tag");
  }
  std::string digits() {
    const size_t start = pos_;
    while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    if (pos_ > start && pos_ >= src_.size()) fail("unexpected end of input");
    return src_.substr(start, pos_ - start);
  }

  bool match_rule(int& depth) {
    for (const Rule& r : kRules) {
      if (r.seq.empty()) break;
      if (r.seq == "}}" && depth > 0) continue;
      if (src_.compare(pos_, r.seq.size(), r.seq) != 0) continue;
      push(r.type, std::string(r.seq));
      if (r.type == Tok::OpenExpression) depth = 0;
      else if (r.type == Tok::OpenBrace) ++depth;
      else if (r.type == Tok::CloseBrace) --depth;
      pos_ += r.seq.size();
      return true;
    }
    return false;
  }

  std::string string_body(char quote) {
    std::string out;
    for (;;) {
      if (pos_ >= src_.size()) fail("unterminated string literal");
      const char c = src_[pos_];
      if (c == quote) return out;
      ++pos_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) fail("unterminated string literal");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'x':
        case 'u': {
          const size_t len = e == 'x' ? 2 : 4;
          if (pos_ + len > src_.size()) fail("invalid hexadecimal escape sequence");
          uint32_t cp = 0;
          for (size_t k = 0; k < len; ++k) {
            const char h = src_[pos_ + k];
            const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) fail(std::string("invalid hexadecimal escape sequence \\") + e);
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          pos_ += len;
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("unexpected escaped character '") + e + "'");
      }
    }
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;  // a lone surrogate has no UTF-8 form
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string src_;
  size_t pos_ = 0;
  mutable size_t line_pos_ = 0;
  mutable int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

const char* token_name(Tok t) {
  switch (t) {
    case Tok::Text: return "text";
    case Tok::Number: return "number";
    case Tok::String: return "string";
    case Tok::Ident: return "identifier";
    case Tok::Equals: return "'='";
    case Tok::OpenParen: return "'('";
    case Tok::CloseParen: return "')'";
    case Tok::OpenStatement: return "'{%'";
    case Tok::CloseStatement: return "'%}'";
    case Tok::OpenExpression: return "'{{'";
    case Tok::CloseExpression: return "'}}'";
    case Tok::OpenBracket: return "'['";
    case Tok::CloseBracket: return "']'";
    case Tok::OpenBrace: return "'{'";
    case Tok::CloseBrace: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Dot: return "'.'";
    case Tok::Colon: return "':'";
    case Tok::Pipe: return "'|'";
    case Tok::Additive: return "an additive operator";
    case Tok::Multiplicative: return "a multiplicative operator";
    case Tok::Power: return "'**'";
    case Tok::Comparison: return "a comparison operator";
    case Tok::Unary: return "a unary operator";
    case Tok::Comment: return "a comment";
  }
  return "?";
}

std::vector<Token> tokenize(std::string_view source) { return Lexer(preprocess(source)).run(); }

}  // namespace nexus::tmpl
