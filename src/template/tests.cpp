// The tests of jinja.h (`x is name`, `x is name(arg)`), as the reference
// renderer's table plus Jinja2's divisibleby, ne, in, float, sameas.
#include <array>
#include <string_view>

#include "template/interpreter.h"

namespace nexus::tmpl {

namespace {

const Value& arg0(const std::string& name, const CallArgs& args) {
  static const Value undefined;
  (void)name;
  return args.pos.empty() ? undefined : args.pos[0];
}

bool int_test(const std::string& name, const Value& v) {
  if (!v.is(Kind::Int)) runtime_error("test '" + name + "' needs an integer, not a " + v.type_name());
  return true;
}

bool is_lower(const std::string& s) {
  for (char c : s) if (c >= 'A' && c <= 'Z') return false;
  return true;
}
bool is_upper(const std::string& s) {
  for (char c : s) if (c >= 'a' && c <= 'z') return false;
  return true;
}

}  // namespace

bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
  const Kind k = v.kind();
  if (name == "boolean") return k == Kind::Bool;
  if (name == "callable") return k == Kind::Function;
  if (name == "odd") return int_test(name, v) && v.as_int() % 2 != 0;
  if (name == "even") return int_test(name, v) && v.as_int() % 2 == 0;
  if (name == "false") return k == Kind::Bool && !v.as_bool();
  if (name == "true") return k == Kind::Bool && v.as_bool();
  if (name == "none") return k == Kind::None;
  if (name == "string") return k == Kind::String;
  if (name == "number") return v.is_number();
  if (name == "integer") return k == Kind::Int;
  if (name == "float") return k == Kind::Float;
  if (name == "iterable") return k == Kind::Array || k == Kind::String || k == Kind::Object;
  if (name == "mapping") return k == Kind::Object;
  if (name == "sequence") return k == Kind::Array || k == Kind::Object || k == Kind::String;
  if (name == "lower") return k == Kind::String && is_lower(v.str());
  if (name == "upper") return k == Kind::String && is_upper(v.str());
  if (name == "defined") return k != Kind::Undefined;
  if (name == "undefined") return k == Kind::Undefined;
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return strict_equals(v, arg0(name, args));
  if (name == "ne" || name == "!=") return !strict_equals(v, arg0(name, args));
  if (name == "divisibleby") {
    const Value& d = arg0(name, args);
    if (!v.is(Kind::Int) || !d.is(Kind::Int) || d.as_int() == 0) {
      runtime_error("test 'divisibleby' needs a non-zero integer divisor and an integer");
    }
    return d.as_int() == -1 || v.as_int() % d.as_int() == 0;
  }
  if (name == "in") {
    const Value& c = arg0(name, args);
    if (c.is(Kind::Array)) {
      for (const Value& x : c.arr()) if (strict_equals(x, v)) return true;
      return false;
    }
    if (c.is(Kind::String) && k == Kind::String) return c.str().find(v.str()) != std::string::npos;
    if (c.is(Kind::Object) && k == Kind::String) return c.map().find(v.str()) != nullptr;
    runtime_error(std::string("test 'in' needs a list, string or dict, not a ") + c.type_name());
  }
  runtime_error("unknown test '" + name + "'");
}

}  // namespace nexus::tmpl
