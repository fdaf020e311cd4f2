#include "template/parser.h"

#include <set>
#include <string>
#include <utility>

#include "template/template_error.h"

namespace nexus::tmpl {

namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  NodeList run() {
    NodeList out;
    while (cur_ < t_.size()) out.push_back(parse_any());
    return out;
  }

 private:
  // Depth guard for every recursive entry point.
  struct Deeper {
    explicit Deeper(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) p_.fail("template nested deeper than " + std::to_string(kMaxParseDepth) + " levels");
    }
    ~Deeper() { --p_.depth_; }
    Parser& p_;
  };

  bool at_end(size_t k = 0) const { return cur_ + k >= t_.size(); }
  bool is(Tok type, size_t k = 0) const { return !at_end(k) && t_[cur_ + k].type == type; }
  bool is_ident(std::string_view name, size_t k = 0) const { return is(Tok::Ident, k) && t_[cur_ + k].value == name; }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(Tok::OpenStatement) || !is(Tok::Ident, 1)) return false;
    for (auto n : names) if (t_[cur_ + 1].value == n) return true;
    return false;
  }
  int line() const { return at_end() ? (t_.empty() ? 1 : t_.back().line) : t_[cur_].line; }

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(TemplateError::Kind::Syntax, "template syntax error at line " + std::to_string(line()) + ": " + what);
  }
  const Token& next(const char* what) {
    if (at_end()) fail(std::string("unexpected end of template, expected ") + what);
    return t_[cur_++];
  }
  const Token& expect(Tok type, const char* what) {
    if (at_end()) fail(std::string("unexpected end of template, expected ") + what);
    if (t_[cur_].type != type) fail(std::string("expected ") + what + ", got " + describe(t_[cur_]));
    return t_[cur_++];
  }
  void expect_ident(std::string_view name) {
    if (!is_ident(name)) fail("expected '" + std::string(name) + "'" + (at_end() ? "" : ", got " + describe(t_[cur_])));
    ++cur_;
  }
  static std::string describe(const Token& t) {
    if (t.type == Tok::Ident || t.type == Tok::Number) return "'" + t.value + "'";
    return token_name(t.type);
  }
  // Statements up to one of `ends` (not consumed); fails at the template's end.
  NodeList block_until(std::initializer_list<std::string_view> ends, const char* opener) {
    NodeList body;
    while (!is_statement(ends)) {
      if (at_end()) fail(std::string("unclosed '") + opener + "' block: expected {% " + std::string(*ends.begin()) + " %}");
      body.push_back(parse_any());
    }
    return body;
  }
  void close_block(std::string_view end) {
    expect(Tok::OpenStatement, "'{%'");
    expect_ident(end);
    expect(Tok::CloseStatement, "'%}'");
  }

  NodePtr make(NodeKind k) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = line();
    return n;
  }

  NodePtr parse_any() {
    Deeper guard(*this);
    const Token& t = t_[cur_];
    switch (t.type) {
      case Tok::Comment: {
        ++cur_;
        auto n = make(NodeKind::Text);  // renders nothing
        return n;
      }
      case Tok::Text: {
        auto n = make(NodeKind::Text);
        n->str = t.value;
        ++cur_;
        return n;
      }
      case Tok::OpenStatement: return parse_statement();
      case Tok::OpenExpression: {
        ++cur_;
        NodePtr e = parse_expression();
        expect(Tok::CloseExpression, "'}}'");
        return e;
      }
      default: fail("unexpected " + describe(t));
    }
  }

  NodePtr parse_statement() {
    expect(Tok::OpenStatement, "'{%'");
    if (!is(Tok::Ident)) fail(at_end() ? "unexpected end of template" : "expected a statement name, got " + describe(t_[cur_]));
    const std::string name = t_[cur_++].value;
    if (name == "set") return parse_set();
    if (name == "if") {
      NodePtr n = parse_if();
      close_block("endif");
      return n;
    }
    if (name == "for") {
      NodePtr n = parse_for();
      close_block("endfor");
      return n;
    }
    if (name == "macro") {
      auto n = make(NodeKind::Macro);
      if (!is(Tok::Ident)) fail("expected a macro name");
      n->str = t_[cur_++].value;
      n->list = parse_args(true);
      expect(Tok::CloseStatement, "'%}'");
      n->body = block_until({"endmacro"}, "macro");
      close_block("endmacro");
      return n;
    }
    if (name == "call") {
      auto n = make(NodeKind::CallBlock);
      if (is(Tok::OpenParen)) n->list = parse_args(true);
      if (!is(Tok::Ident)) fail("expected a macro name after 'call'");
      auto callee = make(NodeKind::Ident);
      callee->str = t_[cur_++].value;
      auto call = make(NodeKind::Call);
      call->a = std::move(callee);
      call->list = parse_args(false);
      n->a = std::move(call);
      expect(Tok::CloseStatement, "'%}'");
      n->body = block_until({"endcall"}, "call");
      close_block("endcall");
      return n;
    }
    if (name == "filter") {
      auto n = make(NodeKind::FilterBlock);
      n->a = parse_filter_ref(nullptr);
      expect(Tok::CloseStatement, "'%}'");
      n->body = block_until({"endfilter"}, "filter");
      close_block("endfilter");
      return n;
    }
    if (name == "break" || name == "continue") {
      auto n = make(name == "break" ? NodeKind::Break : NodeKind::Continue);
      expect(Tok::CloseStatement, "'%}'");
      return n;
    }
    --cur_;
    fail("unknown statement '" + name + "'");
  }

  NodePtr parse_set() {
    auto n = make(NodeKind::Set);
    n->a = parse_sequence(false);
    if (is(Tok::Equals)) {
      ++cur_;
      n->b = parse_sequence(false);
    } else {
      expect(Tok::CloseStatement, "'=' or '%}'");
      n->body = block_until({"endset"}, "set");
      expect(Tok::OpenStatement, "'{%'");
      expect_ident("endset");
    }
    expect(Tok::CloseStatement, "'%}'");
    return n;
  }

  NodePtr parse_if() {
    auto n = make(NodeKind::If);
    n->a = parse_expression();
    expect(Tok::CloseStatement, "'%}'");
    n->body = block_until({"elif", "else", "endif"}, "if");
    if (is_statement({"elif"})) {
      cur_ += 2;
      n->alt.push_back(parse_if());
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      n->alt = block_until({"endif"}, "if");
    }
    return n;
  }

  NodePtr parse_for() {
    auto n = make(NodeKind::For);
    n->a = parse_sequence(true);
    if (n->a->kind != NodeKind::Ident && n->a->kind != NodeKind::TupleLit) fail("expected a loop variable");
    expect_ident("in");
    NodePtr iter = parse_expression();
    if (iter->kind == NodeKind::Select) {
      n->b = std::move(iter->a);
      n->c = std::move(iter->b);
    } else {
      n->b = std::move(iter);
    }
    expect(Tok::CloseStatement, "'%}'");
    n->body = block_until({"endfor", "else"}, "for");
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      n->alt = block_until({"endfor"}, "for");
    }
    return n;
  }

  // a, b, c -> TupleLit (or the single expression).
  NodePtr parse_sequence(bool primary) {
    NodePtr first = primary ? parse_primary() : parse_expression();
    if (!is(Tok::Comma)) return first;
    auto t = make(NodeKind::TupleLit);
    t->list.push_back(std::move(first));
    while (is(Tok::Comma)) {
      ++cur_;
      t->list.push_back(primary ? parse_primary() : parse_expression());
    }
    return t;
  }

  NodePtr parse_expression() {
    Deeper guard(*this);
    NodePtr a = parse_or();
    if (!is_ident("if")) return a;
    ++cur_;
    NodePtr test = parse_or();
    if (is_ident("else")) {
      ++cur_;
      auto n = make(NodeKind::Ternary);
      n->a = std::move(test);
      n->b = std::move(a);
      n->c = parse_expression();
      return n;
    }
    auto n = make(NodeKind::Select);
    n->a = std::move(a);
    n->b = std::move(test);
    return n;
  }

  NodePtr binary(std::string op, NodePtr l, NodePtr r) {
    auto n = make(NodeKind::Binary);
    n->str = std::move(op);
    n->a = std::move(l);
    n->b = std::move(r);
    return n;
  }

  NodePtr parse_or() {
    NodePtr l = parse_and();
    while (is_ident("or")) {
      ++cur_;
      l = binary("or", std::move(l), parse_and());
    }
    return l;
  }
  NodePtr parse_and() {
    NodePtr l = parse_not();
    while (is_ident("and")) {
      ++cur_;
      l = binary("and", std::move(l), parse_not());
    }
    return l;
  }
  NodePtr parse_not() {
    if (is_ident("not")) {
      Deeper guard(*this);
      ++cur_;
      auto n = make(NodeKind::Unary);
      n->str = "not";
      n->a = parse_not();
      return n;
    }
    return parse_comparison();
  }
  NodePtr parse_comparison() {
    NodePtr l = parse_additive();
    for (;;) {
      std::string op;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (is_ident("in")) {
        op = "in";
        ++cur_;
      } else if (is(Tok::Comparison)) {
        op = t_[cur_++].value;
      } else {
        return l;
      }
      l = binary(op, std::move(l), parse_additive());
    }
  }
  NodePtr parse_additive() {
    NodePtr l = parse_multiplicative();
    while (is(Tok::Additive)) {
      const std::string op = t_[cur_++].value;
      l = binary(op, std::move(l), parse_multiplicative());
    }
    return l;
  }
  NodePtr parse_multiplicative() {
    NodePtr l = parse_power();
    while (is(Tok::Multiplicative)) {
      const std::string op = t_[cur_++].value;
      l = binary(op, std::move(l), parse_power());
    }
    return l;
  }
  NodePtr parse_power() {
    NodePtr l = parse_test();
    while (is(Tok::Power)) {
      ++cur_;
      l = binary("**", std::move(l), parse_test());
    }
    return l;
  }
  NodePtr parse_test() {
    NodePtr operand = parse_filter();
    while (is_ident("is")) {
      ++cur_;
      auto n = make(NodeKind::Test);
      if (is_ident("not")) {
        n->flag = true;
        ++cur_;
      }
      if (!is(Tok::Ident)) fail("expected a test name after 'is'");
      n->str = t_[cur_++].value;
      if (is(Tok::OpenParen)) n->list = parse_args(false);
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }
  // `name` or `name(args)` after a pipe (or in {% filter %}).
  NodePtr parse_filter_ref(NodePtr operand) {
    auto n = make(NodeKind::Filter);
    if (!is(Tok::Ident)) fail("expected a filter name");
    n->str = t_[cur_++].value;
    if (is(Tok::OpenParen)) {
      n->flag = true;
      n->list = parse_args(false);
    }
    n->a = std::move(operand);
    return n;
  }
  NodePtr parse_filter() {
    NodePtr operand = parse_unary_sign();
    while (is(Tok::Pipe)) {
      ++cur_;
      operand = parse_filter_ref(std::move(operand));
    }
    return operand;
  }
  NodePtr parse_unary_sign() {
    if ((is(Tok::Unary) || is(Tok::Additive)) && (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      Deeper guard(*this);
      auto n = make(NodeKind::Unary);
      n->str = t_[cur_++].value;
      n->a = parse_unary_sign();
      return n;
    }
    return parse_call_member();
  }
  NodePtr parse_call_member() {
    NodePtr m = parse_member(parse_primary());
    while (is(Tok::OpenParen)) {
      Deeper guard(*this);
      auto call = make(NodeKind::Call);
      call->a = std::move(m);
      call->list = parse_args(false);
      m = parse_member(std::move(call));
    }
    return m;
  }

  // ( ... ): call arguments, or a macro's parameters (identifiers, name=default).
  NodeList parse_args(bool parameters) {
    expect(Tok::OpenParen, "'('");
    NodeList args;
    std::set<std::string> names;
    bool saw_keyword = false;
    while (!is(Tok::CloseParen)) {
      if (at_end()) fail("unclosed '(': expected ')'");
      const bool kw_spread = is(Tok::Power);
      const bool spread = is(Tok::Multiplicative) && t_[cur_].value == "*";
      if (parameters && (kw_spread || spread)) fail("argument unpacking is not allowed in parameter declarations");
      NodePtr arg;
      if (kw_spread || spread) {
        ++cur_;
        arg = make(kw_spread ? NodeKind::KwSpread : NodeKind::Spread);
        arg->a = parse_expression();
      } else {
        arg = parse_expression();
        if (is(Tok::Equals)) {
          ++cur_;
          if (arg->kind != NodeKind::Ident) fail("expected an identifier before '='");
          auto kw = make(NodeKind::Kwarg);
          kw->str = arg->str;
          kw->a = parse_expression();
          arg = std::move(kw);
        }
        if (parameters) {
          if (arg->kind != NodeKind::Ident && arg->kind != NodeKind::Kwarg) fail("expected a parameter name");
          if (!names.insert(arg->str).second) fail("duplicate parameter '" + arg->str + "'");
        }
        if (arg->kind == NodeKind::Kwarg) saw_keyword = true;
        else if (saw_keyword) fail(parameters ? "a parameter without default follows one with a default"
                                              : "a positional argument follows a keyword argument");
      }
      args.push_back(std::move(arg));
      if (is(Tok::Comma)) ++cur_;
      else if (!is(Tok::CloseParen)) fail("expected ',' or ')' in an argument list");
    }
    ++cur_;
    return args;
  }

  NodePtr parse_member(NodePtr object) {
    while (is(Tok::Dot) || is(Tok::OpenBracket)) {
      Deeper guard(*this);
      const bool computed = is(Tok::OpenBracket);
      ++cur_;
      auto m = make(NodeKind::Member);
      m->flag = computed;
      if (computed) {
        m->b = parse_subscript();
        expect(Tok::CloseBracket, "']'");
      } else {
        if (is(Tok::Ident)) {
          m->b = make(NodeKind::Ident);
          m->b->str = t_[cur_++].value;
        } else if (is(Tok::Number) && t_[cur_].value.find('.') == std::string::npos) {
          m->b = parse_primary();
        } else {
          fail("expected an attribute name after '.'");
        }
      }
      m->a = std::move(object);
      object = std::move(m);
    }
    return object;
  }

  // x[a], x[a:b], x[a:b:c] (each part optional in a slice).
  NodePtr parse_subscript() {
    NodeList parts;
    bool slice = false;
    while (!is(Tok::CloseBracket)) {
      if (at_end()) fail("unclosed '[': expected ']'");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++cur_;
        slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::Colon)) {
          ++cur_;
          slice = true;
        } else if (!is(Tok::CloseBracket)) {
          fail("expected ':' or ']' in a subscript");
        }
      }
    }
    if (parts.empty()) fail("empty subscript '[]'");
    if (!slice) return std::move(parts[0]);
    if (parts.size() > 3) fail("a slice takes at most 3 parts");
    auto s = make(NodeKind::Slice);
    s->list = std::move(parts);
    return s;
  }

  NodePtr parse_primary() {
    Deeper guard(*this);
    const Token& t = next("an expression");
    switch (t.type) {
      case Tok::Number: {
        if (t.value.find('.') != std::string::npos) {
          auto n = make(NodeKind::Float);
          n->f = std::stod(t.value);
          return n;
        }
        auto n = make(NodeKind::Int);
        try {
          n->i = std::stoll(t.value);
        } catch (const std::exception&) {
          fail("integer literal out of range: " + t.value);
        }
        return n;
      }
      case Tok::String: {
        auto n = make(NodeKind::String);
        n->str = t.value;
        while (is(Tok::String)) n->str += t_[cur_++].value;  // adjacent literals concatenate
        return n;
      }
      case Tok::Ident: {
        auto n = make(NodeKind::Ident);
        n->str = t.value;
        return n;
      }
      case Tok::OpenParen: {
        NodePtr e = parse_sequence(false);
        expect(Tok::CloseParen, "')'");
        return e;
      }
      case Tok::OpenBracket: {
        auto n = make(NodeKind::ArrayLit);
        while (!is(Tok::CloseBracket)) {
          if (at_end()) fail("unclosed '[': expected ']'");
          n->list.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
          else if (!is(Tok::CloseBracket)) fail("expected ',' or ']' in a list");
        }
        ++cur_;
        return n;
      }
      case Tok::OpenBrace: {
        auto n = make(NodeKind::ObjectLit);
        while (!is(Tok::CloseBrace)) {
          if (at_end()) fail("unclosed '{': expected '}'");
          n->list.push_back(parse_expression());
          expect(Tok::Colon, "':' between a key and its value");
          n->list.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
          else if (!is(Tok::CloseBrace)) fail("expected ',' or '}' in a dict");
        }
        ++cur_;
        return n;
      }
      default: --cur_; fail("unexpected " + describe(t));
    }
  }

  const std::vector<Token>& t_;
  size_t cur_ = 0;
  int depth_ = 0;
};

}  // namespace

NodeList parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace nexus::tmpl
