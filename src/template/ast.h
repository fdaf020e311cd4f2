// The syntax tree of a Jinja template (parser.h builds it, interpreter.h runs it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nexus::tmpl {

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

enum class NodeKind {
  // Expressions.
  Text,        // str: literal output
  Int,         // i
  Float,       // f
  String,      // str
  Ident,       // str
  ArrayLit,    // list: elements
  TupleLit,    // list: elements
  ObjectLit,   // list: key, value, key, value, ...
  Member,      // a: object, b: property; flag: computed (a[b]) vs a.b
  Slice,       // list: start, stop, step (each may be null)
  Call,        // a: callee, list: arguments (Kwarg / Spread / KwSpread or expressions)
  Filter,      // a: operand, str: filter name, list: arguments, flag: called with parentheses
  Test,        // a: operand, str: test name, list: arguments, flag: negated (`is not`)
  Unary,       // str: "not" | "-" | "+", a: operand
  Binary,      // str: operator, a, b
  Ternary,     // a: condition, b: value if true, c: value if false
  Select,      // a: value, b: condition (`a if b` without else: undefined when false)
  Kwarg,       // str: name, a: value
  Spread,      // a: value (*args)
  KwSpread,    // a: value (**kwargs)
  // Statements.
  If,          // a: condition, body, alt (elif chains nest in alt)
  For,         // a: loop variable (Ident or TupleLit), b: iterable, c: filter condition, body, alt (else)
  Set,         // a: target, b: value or null (then body: {% set x %}...{% endset %})
  Macro,       // str: name, list: parameters (Ident or Kwarg with default), body
  CallBlock,   // a: the Call, list: caller parameters, body
  FilterBlock, // a: a Filter node whose operand is null, body
  Break,
  Continue,
};

struct Node {
  NodeKind kind;
  int line = 0;
  std::string str;
  int64_t i = 0;
  double f = 0;
  bool flag = false;
  NodePtr a, b, c;
  NodeList list, body, alt;
};

}  // namespace nexus::tmpl
