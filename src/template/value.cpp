#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/template_error.h"
#include "template/utf8.h"

namespace nexus::tmpl {

const Value* ObjectMap::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ObjectMap::set(std::string key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

const Value* CallArgs::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::array(Array a) {
  Value v;
  v.kind_ = Kind::Array;
  v.a_ = std::make_shared<const Array>(std::move(a));
  return v;
}
Value Value::object(ObjectMap m) {
  Value v;
  v.kind_ = Kind::Object;
  v.o_ = std::make_shared<const ObjectMap>(std::move(m));
  return v;
}
Value Value::namespace_of(ObjectMap* ns) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.ns_ = ns;
  return v;
}
Value Value::function(NativeFn fn) {
  Value v;
  v.kind_ = Kind::Function;
  v.fn_ = std::make_shared<const NativeFn>(std::move(fn));
  return v;
}

double Value::as_double() const {
  if (kind_ == Kind::Float) return f_;
  if (kind_ == Kind::Bool) return b_ ? 1 : 0;
  return static_cast<double>(i_);
}

const std::string& Value::str() const {
  static const std::string empty;
  return s_ ? *s_ : empty;
}

const Array& Value::arr() const {
  static const Array empty;
  return a_ ? *a_ : empty;
}

const ObjectMap& Value::map() const {
  static const ObjectMap empty;
  if (kind_ == Kind::Namespace) return *ns_;
  return o_ ? *o_ : empty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0 && !std::isnan(f_);
    case Kind::String: return !str().empty();
    case Kind::Array: return !arr().empty();
    case Kind::Object: return !map().items.empty();
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Object: return "object";
    case Kind::Namespace: return "namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::Array: return a_.get();
    case Kind::Object: return o_.get();
    case Kind::Namespace: return ns_;
    case Kind::Function: return fn_.get();
    default: return nullptr;
  }
}

std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  // to_chars writes 1e+21 as "1e+21" and 1e21 as plain digits below; JavaScript
  // switches to exponent form from 1e21 and below 1e-6: close enough for
  // templates (numbers rarely appear in prompts).
  return s;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    if (!ensure_ascii || c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // ensure_ascii: each UTF-16 code unit as \uXXXX (as the reference does).
    const Utf8Char u = decode_utf8(s, i);
    auto unit = [&](uint32_t cu) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cu);
      out += buf;
    };
    if (u.cp >= 0x10000) {
      const uint32_t v = u.cp - 0x10000;
      unit(0xd800 + (v >> 10));
      unit(0xdc00 + (v & 0x3ff));
    } else {
      unit(u.cp);
    }
    i += u.len;
  }
  out += '"';
  return out;
}

namespace {

void json_into(std::string& out, const Value& v, const JsonOptions& o, bool undef_null, int depth, int max_depth) {
  if (depth > max_depth) {
    throw TemplateError(TemplateError::Kind::Limit, "value nested deeper than " + std::to_string(max_depth) +
                                                         " levels (a namespace that holds itself?)");
  }
  const bool indenting = o.indent > 0;
  const std::string item_sep = o.custom_separators ? o.item_sep : (indenting ? "," : ", ");
  const std::string key_sep = o.custom_separators ? o.key_sep : ": ";
  switch (v.kind()) {
    case Kind::Undefined: out += undef_null ? "null" : "undefined"; return;
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.as_int()); return;
    case Kind::Float: {
      const double d = v.as_double();
      out += std::isfinite(d) ? js_number(d) : "null";  // JSON.stringify writes NaN/Infinity as null
      return;
    }
    case Kind::String: out += json_quote(v.str(), o.ensure_ascii); return;
    case Kind::Function: runtime_error("cannot convert a function to JSON");
    default: break;
  }
  const std::string pad = indenting ? std::string(static_cast<size_t>(o.indent), ' ') : "";
  std::string base = "\n";
  for (int d = 0; d < depth; ++d) base += pad;
  const std::string child = base + pad;
  if (v.is(Kind::Array)) {
    const Array& a = v.arr();
    out += '[';
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) out += item_sep;
      if (indenting) out += child;
      json_into(out, a[i], o, undef_null, depth + 1, max_depth);
    }
    if (indenting && !a.empty()) out += base;
    out += ']';
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.map().items) entries.push_back(&e);
  if (o.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
  }
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += item_sep;
    if (indenting) out += child;
    out += json_quote(entries[i]->first, o.ensure_ascii);
    out += key_sep;
    json_into(out, entries[i]->second, o, undef_null, depth + 1, max_depth);
  }
  if (indenting && !entries.empty()) out += base;
  out += '}';
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& o, bool undefined_as_null, int max_depth) {
  std::string out;
  json_into(out, v, o, undefined_as_null, 0, max_depth);
  return out;
}

std::string to_output(const Value& v, int max_depth) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return "";
    case Kind::Bool: return v.as_bool() ? "true" : "false";
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: {
      const double d = v.as_double();
      if (d == 0 && std::signbit(d)) return "-0.0";
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e21) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f", d);
        return buf;
      }
      return js_number(d);
    }
    case Kind::String: return v.str();
    case Kind::Function: return "<function>";
    default: return to_json(v, JsonOptions{}, false, max_depth);
  }
}

bool loose_equals(const Value& a, const Value& b) {
  if (a.is_numeric_like() && b.is_numeric_like()) return a.as_double() == b.as_double();
  const bool a_nil = a.is_none() || a.is_undefined(), b_nil = b.is_none() || b.is_undefined();
  if (a_nil || b_nil) return a_nil && b_nil;
  if (a.is(Kind::String) && b.is(Kind::String)) return a.str() == b.str();
  if (a.kind() != b.kind()) return false;
  return a.identity() == b.identity();
}

bool strict_equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::Bool: return a.as_bool() == b.as_bool();
    case Kind::String: return a.str() == b.str();
    default: return a.identity() == b.identity();
  }
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if ((a.is_none() && b.is_none()) || (a.is_undefined() && b.is_undefined())) return 0;
  if (a.is_numeric_like() && b.is_numeric_like()) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is(Kind::String) && b.is(Kind::String)) {
    std::string x = a.str(), y = b.str();
    if (!case_sensitive) {
      x = ascii_lower(x);
      y = ascii_lower(y);
    }
    return x < y ? -1 : x > y ? 1 : 0;
  }
  runtime_error(std::string("cannot compare ") + a.type_name() + " with " + b.type_name());
}

}  // namespace nexus::tmpl
