// The filters of jinja.h, keyed by name; each says which operand types it
// takes (as the reference renderer's applyFilter does, plus Python Jinja2's
// obvious readings where the reference has none, e.g. `first` of a string).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "template/interpreter.h"
#include "template/utf8.h"

namespace nexus::tmpl {

namespace {

struct FilterCtx {
  Interpreter& in;
  const Value& v;
  const CallArgs& args;
  const std::string& name;

  [[noreturn]] void wrong_type() const {
    runtime_error("filter '" + name + "' does not apply to a value of type " + v.type_name());
  }
  bool flag(size_t i, std::string_view key, bool def) const {
    const Value* a = args.get(i, key);
    if (!a || a->is_undefined()) return def;
    if (!a->is(Kind::Bool)) runtime_error("filter '" + name + "': '" + std::string(key) + "' must be a boolean");
    return a->as_bool();
  }
  Value string(std::string s) const {
    in.check_string(s.size());
    in.step(1 + s.size() / 256);
    return Value::string(std::move(s));
  }
};

std::string join_values(const Array& a, std::string_view sep, int md) {
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (i) out += sep;
    if (!a[i].is_none() && !a[i].is_undefined()) out += js_string(a[i], md);  // JS join writes null as ""
  }
  return out;
}

// parseInt(s, 10) / parseFloat(s): the longest numeric prefix after whitespace.
bool parse_int_prefix(std::string_view s, int64_t& out) {
  s = trim_start(s);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  const size_t start = i;
  int64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[i] - '0', &v)) return false;
    ++i;
  }
  if (i == start) return false;
  out = neg ? -v : v;
  return true;
}

bool parse_float_prefix(std::string_view s, double& out) {
  const std::string t(trim_start(s));
  if (t.empty() || t[0] == 'n' || t[0] == 'N' || t.find("0x") == 0 || t.find("0X") == 0) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end != t.c_str();
}

std::string title_case(std::string_view s) {
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  std::string o(s);
  for (size_t i = 0; i < o.size(); ++i) {
    if (word(o[i]) && (i == 0 || !word(o[i - 1])) && o[i] >= 'a' && o[i] <= 'z') o[i] = static_cast<char>(o[i] - 32);
  }
  return o;
}

Value f_tojson(const FilterCtx& c) {
  JsonOptions o;
  if (const Value* ind = c.args.get(99, "indent"); ind && !ind->is_none() && !ind->is_undefined()) {
    if (!ind->is(Kind::Int)) runtime_error("filter 'tojson': indent must be an integer");
    o.indent = static_cast<int>(std::clamp<int64_t>(ind->as_int(), -1, 64));
  }
  o.ensure_ascii = c.flag(99, "ensure_ascii", false);
  o.sort_keys = c.flag(99, "sort_keys", false);
  if (const Value* sep = c.args.get(99, "separators"); sep && !sep->is_none() && !sep->is_undefined()) {
    if (!sep->is(Kind::Array) || sep->arr().size() != 2 || !sep->arr()[0].is(Kind::String) ||
        !sep->arr()[1].is(Kind::String)) {
      runtime_error("filter 'tojson': separators must be a pair of strings");
    }
    o.custom_separators = true;
    o.item_sep = sep->arr()[0].str();
    o.key_sep = sep->arr()[1].str();
  }
  return c.string(to_json(c.v, o, true, c.in.json_depth()));
}

Value f_default(const FilterCtx& c) {
  const Value* d = c.args.get(0, "default_value");
  const bool boolean = c.flag(1, "boolean", false);
  if (c.v.is_undefined() || (boolean && !c.v.truthy())) return d ? *d : Value::string("");
  return c.v;
}

Value f_length(const FilterCtx& c) {
  switch (c.v.kind()) {
    case Kind::String: return Value::integer(static_cast<int64_t>(code_point_count(c.v.str())));
    case Kind::Array: return Value::integer(static_cast<int64_t>(c.v.arr().size()));
    case Kind::Object: return Value::integer(static_cast<int64_t>(c.v.map().items.size()));
    default: c.wrong_type();
  }
}

Value f_join(const FilterCtx& c) {
  const Value* sep = c.args.get(0, "d");
  if (!sep) sep = c.args.get(99, "separator");
  std::string s;
  if (sep) {
    if (!sep->is(Kind::String)) runtime_error("filter 'join': the separator must be a string");
    s = sep->str();
  }
  if (c.v.is(Kind::Array)) {
    if (const Value* attr = c.args.get(99, "attribute")) {
      Array picked;
      for (const Value& x : c.v.arr()) picked.push_back(attribute_path(x, attr->is(Kind::String) ? attr->str() : ""));
      return c.string(join_values(picked, s, c.in.json_depth()));
    }
    return c.string(join_values(c.v.arr(), s, c.in.json_depth()));
  }
  if (c.v.is(Kind::String)) {
    std::string out;
    const std::string& str = c.v.str();
    for (size_t i = 0; i < str.size();) {
      const size_t len = decode_utf8(str, i).len;
      if (i) out += s;
      out.append(str, i, len);
      i += len;
    }
    return c.string(std::move(out));
  }
  c.wrong_type();
}

Value f_int_float(const FilterCtx& c, bool to_int) {
  const Value* d = c.args.get(0, "default");
  const Value def = d ? *d : (to_int ? Value::integer(0) : Value::number(0));
  switch (c.v.kind()) {
    case Kind::String: {
      if (to_int) {
        int64_t i;
        return parse_int_prefix(c.v.str(), i) ? Value::integer(i) : def;
      }
      double f;
      return parse_float_prefix(c.v.str(), f) ? Value::number(f) : def;
    }
    case Kind::Int: return to_int ? c.v : Value::number(c.v.as_double());
    case Kind::Float: {
      if (!to_int) return c.v;
      const double t = std::trunc(c.v.as_double());
      if (!std::isfinite(t) || std::fabs(t) > 9.2e18) return def;
      return Value::integer(static_cast<int64_t>(t));
    }
    case Kind::Bool: return to_int ? Value::integer(c.v.as_bool() ? 1 : 0) : Value::number(c.v.as_bool() ? 1 : 0);
    default: c.wrong_type();
  }
}

Value f_string(const FilterCtx& c) {
  if (c.v.is_undefined()) return Value::string("");
  if (c.v.is_none()) return Value::string("None");
  return c.string(to_output(c.v, c.in.json_depth()));
}

Value f_indent(const FilterCtx& c) {
  if (!c.v.is(Kind::String)) c.wrong_type();
  const Value* w = c.args.get(0, "width");
  std::string pad(4, ' ');
  if (w && w->is(Kind::Int)) pad.assign(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 1024)), ' ');
  else if (w && w->is(Kind::String)) pad = w->str();
  else if (w && !w->is_undefined()) runtime_error("filter 'indent': width must be an integer or a string");
  const Value* first_v = c.args.get(1, "first");
  const Value* blank_v = c.args.get(2, "blank");
  const bool first = first_v && first_v->truthy(), blank = blank_v && blank_v->truthy();
  const std::string& s = c.v.str();
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t nl = s.find('\n', start);
    const std::string_view part(s.data() + start, (nl == std::string::npos ? s.size() : nl) - start);
    if (!((!first && line == 0) || (!blank && part.empty()))) out += pad;
    out += part;
    c.in.check_string(out.size());
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return c.string(std::move(out));
}

Value f_sort(const FilterCtx& c) {
  if (!c.v.is(Kind::Array)) c.wrong_type();
  const bool reverse = c.flag(0, "reverse", false);
  const bool case_sensitive = c.flag(1, "case_sensitive", false);
  const Value* attr = c.args.get(2, "attribute");
  std::string path;
  if (attr && attr->is(Kind::String)) path = attr->str();
  else if (attr && attr->is(Kind::Int)) path = std::to_string(attr->as_int());
  else if (attr && !attr->is_none() && !attr->is_undefined()) runtime_error("filter 'sort': attribute must be a string or an integer");
  const bool by_attr = attr && (attr->is(Kind::String) || attr->is(Kind::Int));
  Array a = c.v.arr();
  c.in.step(a.size() * 4);
  std::stable_sort(a.begin(), a.end(), [&](const Value& x, const Value& y) {
    const int r = by_attr ? compare_values(attribute_path(x, path), attribute_path(y, path), case_sensitive)
                          : compare_values(x, y, case_sensitive);
    return reverse ? r > 0 : r < 0;
  });
  return Value::array(std::move(a));
}

Value f_dictsort(const FilterCtx& c) {
  if (!c.v.is(Kind::Object)) c.wrong_type();
  return builtin_member(c.in, c.v, "dictsort").fn()(c.args);
}

Value f_unique(const FilterCtx& c) {
  if (!c.v.is(Kind::Array)) c.wrong_type();
  Array out;
  c.in.step(c.v.arr().size() * c.v.arr().size() / 16 + 1);
  for (const Value& x : c.v.arr()) {
    bool seen = false;
    for (const Value& y : out) seen = seen || strict_equals(x, y);
    if (!seen) out.push_back(x);
  }
  return Value::array(std::move(out));
}

// selectattr / rejectattr / select / reject.
Value f_select(const FilterCtx& c, bool by_attr, bool keep) {
  if (!c.v.is(Kind::Array)) c.wrong_type();
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (c.args.pos.empty() || !c.args.pos[0].is(Kind::String)) runtime_error("filter '" + c.name + "' needs an attribute name");
    attr = c.args.pos[0].str();
    k = 1;
  }
  std::string test;
  if (c.args.pos.size() > k) {
    if (!c.args.pos[k].is(Kind::String)) runtime_error("filter '" + c.name + "': the test name must be a string");
    test = c.args.pos[k].str();
  }
  CallArgs test_args;
  for (size_t i = k + 1; i < c.args.pos.size(); ++i) test_args.pos.push_back(c.args.pos[i]);
  Array out;
  for (const Value& item : c.v.arr()) {
    c.in.step();
    Value x = item;
    if (by_attr) {
      if (!item.is_mapping()) runtime_error("filter '" + c.name + "' applies to a list of dicts");
      const Value* a = item.map().find(attr);
      if (!a) {
        if (!keep) out.push_back(item);  // a missing attribute fails every test
        continue;
      }
      x = *a;
    }
    const bool r = test.empty() ? x.truthy() : apply_test(test, x, test_args);
    if (r == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Value f_map(const FilterCtx& c) {
  if (!c.v.is(Kind::Array)) c.wrong_type();
  Array out;
  if (const Value* attr = c.args.get(99, "attribute")) {
    if (!attr->is(Kind::String) && !attr->is(Kind::Int)) runtime_error("filter 'map': attribute must be a string");
    const std::string path = attr->is(Kind::String) ? attr->str() : std::to_string(attr->as_int());
    const Value* def = c.args.get(99, "default");
    for (const Value& item : c.v.arr()) {
      c.in.step();
      if (!item.is_mapping() && !item.is(Kind::Array)) runtime_error("filter 'map': the items must be dicts");
      Value x = attribute_path(item, path);
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return Value::array(std::move(out));
  }
  if (c.args.pos.empty() || !c.args.pos[0].is(Kind::String)) runtime_error("filter 'map' needs attribute= or a filter name");
  CallArgs rest;
  rest.pos.assign(c.args.pos.begin() + 1, c.args.pos.end());
  rest.kw = c.args.kw;
  for (const Value& item : c.v.arr()) out.push_back(apply_filter(c.in, item, c.args.pos[0].str(), rest));
  return Value::array(std::move(out));
}

Value f_replace(const FilterCtx& c) {
  if (!c.v.is(Kind::String)) c.wrong_type();
  return builtin_member(c.in, c.v, "replace").fn()(c.args);
}

Value f_first_last(const FilterCtx& c, bool first) {
  if (c.v.is(Kind::Array)) {
    const Array& a = c.v.arr();
    if (a.empty()) return Value();
    return first ? a.front() : a.back();
  }
  if (c.v.is(Kind::String)) {
    const std::vector<size_t> at = code_point_starts(c.v.str());
    if (at.size() < 2) return Value();
    const size_t k = first ? 0 : at.size() - 2;
    return Value::string(c.v.str().substr(at[k], at[k + 1] - at[k]));
  }
  c.wrong_type();
}

Value f_list(const FilterCtx& c) {
  if (c.v.is(Kind::Array)) return c.v;
  Array out;
  if (c.v.is(Kind::String)) {
    const std::string& s = c.v.str();
    for (size_t i = 0; i < s.size();) {
      const size_t len = decode_utf8(s, i).len;
      out.push_back(Value::string(s.substr(i, len)));
      i += len;
    }
  } else if (c.v.is(Kind::Object)) {
    for (const auto& [k, v] : c.v.map().items) out.push_back(Value::string(k));
  } else {
    c.wrong_type();
  }
  c.in.check_items(out.size());
  return Value::array(std::move(out));
}

Value f_items(const FilterCtx& c) {
  if (c.v.is_undefined() || c.v.is_none()) return Value::array({});
  if (!c.v.is(Kind::Object)) c.wrong_type();
  return builtin_member(c.in, c.v, "items").fn()(c.args);
}

Value f_string_op(const FilterCtx& c) {
  if (!c.v.is(Kind::String)) c.wrong_type();
  const std::string& s = c.v.str();
  if (c.name == "upper") return Value::string(ascii_upper(s));
  if (c.name == "lower") return Value::string(ascii_lower(s));
  if (c.name == "trim") {
    const Value* chars = c.args.get(0, "chars");
    if (chars && chars->is(Kind::String)) return builtin_member(c.in, c.v, "strip").fn()(c.args);
    return Value::string(std::string(trim(s)));
  }
  if (c.name == "title") return Value::string(title_case(s));
  if (c.name == "capitalize") {
    std::string o = s;
    if (!o.empty() && o[0] >= 'a' && o[0] <= 'z') o[0] = static_cast<char>(o[0] - 32);
    return Value::string(std::move(o));
  }
  // wordcount
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const size_t sp = space_len_at(s, i);
    if (sp) {
      in_word = false;
      i += sp;
    } else {
      if (!in_word) ++n;
      in_word = true;
      i += decode_utf8(s, i).len;
    }
  }
  return Value::integer(n);
}

Value f_abs(const FilterCtx& c) {
  if (c.v.is(Kind::Int)) {
    if (c.v.as_int() == INT64_MIN) runtime_error("filter 'abs': integer overflow");
    return Value::integer(c.v.as_int() < 0 ? -c.v.as_int() : c.v.as_int());
  }
  if (c.v.is(Kind::Float)) return Value::number(std::fabs(c.v.as_double()));
  c.wrong_type();
}

Value f_reverse(const FilterCtx& c) {
  if (c.v.is(Kind::Array)) {
    Array a = c.v.arr();
    std::reverse(a.begin(), a.end());
    return Value::array(std::move(a));
  }
  if (c.v.is(Kind::String)) {
    const std::string& s = c.v.str();
    const std::vector<size_t> at = code_point_starts(s);
    std::string o;
    for (size_t k = at.size() - 1; k-- > 0;) o.append(s, at[k], at[k + 1] - at[k]);
    return Value::string(std::move(o));
  }
  c.wrong_type();
}

Value f_bool(const FilterCtx& c) { return Value::boolean(c.v.truthy()); }

using FilterFn = Value (*)(const FilterCtx&);

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

const std::array<FilterEntry, 37> kFilters{{
    {"safe", [](const FilterCtx& c) { return c.v; }},
    {"tojson", f_tojson},
    {"default", f_default},
    {"d", f_default},
    {"length", f_length},
    {"count", f_length},
    {"join", f_join},
    {"int", [](const FilterCtx& c) { return f_int_float(c, true); }},
    {"float", [](const FilterCtx& c) { return f_int_float(c, false); }},
    {"string", f_string},
    {"indent", f_indent},
    {"sort", f_sort},
    {"dictsort", f_dictsort},
    {"unique", f_unique},
    {"selectattr", [](const FilterCtx& c) { return f_select(c, true, true); }},
    {"rejectattr", [](const FilterCtx& c) { return f_select(c, true, false); }},
    {"select", [](const FilterCtx& c) { return f_select(c, false, true); }},
    {"reject", [](const FilterCtx& c) { return f_select(c, false, false); }},
    {"map", f_map},
    {"replace", f_replace},
    {"first", [](const FilterCtx& c) { return f_first_last(c, true); }},
    {"last", [](const FilterCtx& c) { return f_first_last(c, false); }},
    {"list", f_list},
    {"items", f_items},
    {"upper", f_string_op},
    {"lower", f_string_op},
    {"trim", f_string_op},
    {"title", f_string_op},
    {"capitalize", f_string_op},
    {"wordcount", f_string_op},
    {"abs", f_abs},
    {"reverse", f_reverse},
    {"bool", f_bool},
    {"e", [](const FilterCtx& c) -> Value { runtime_error("filter '" + c.name + "' (HTML escaping) is not supported"); }},
    {"escape", [](const FilterCtx& c) -> Value { runtime_error("filter '" + c.name + "' (HTML escaping) is not supported"); }},
    {"keys", [](const FilterCtx& c) -> Value {
       if (!c.v.is(Kind::Object)) c.wrong_type();
       return builtin_member(c.in, c.v, "keys").fn()(c.args);
     }},
    {"values", [](const FilterCtx& c) -> Value {
       if (!c.v.is(Kind::Object)) c.wrong_type();
       return builtin_member(c.in, c.v, "values").fn()(c.args);
     }},
}};

}  // namespace

bool is_known_filter(std::string_view name) {
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return true;
  }
  return false;
}

Value apply_filter(Interpreter& in, const Value& operand, const std::string& name, const CallArgs& args) {
  in.step();
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return e.fn(FilterCtx{in, operand, args, name});
  }
  runtime_error("unknown filter '" + name + "'");
}

}  // namespace nexus::tmpl
