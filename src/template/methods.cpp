// Attributes that are not keys: string methods (Python's str, as the
// reference renderer has them), dict methods, and `length`.
#include <algorithm>
#include <string_view>

#include "template/interpreter.h"
#include "template/utf8.h"

namespace nexus::tmpl {

namespace {

std::string need_string(const CallArgs& a, size_t i, std::string_view method, std::string_view what) {
  if (i >= a.pos.size() || !a.pos[i].is(Kind::String)) {
    runtime_error("method '" + std::string(method) + "' needs " + std::string(what) + " (a string)");
  }
  return a.pos[i].str();
}

bool has_code_point(std::string_view chars, std::string_view s, size_t i, size_t& len) {
  len = decode_utf8(s, i).len;
  const std::string_view c = s.substr(i, len);
  for (size_t k = 0; k < chars.size();) {
    const size_t l = decode_utf8(chars, k).len;
    if (chars.substr(k, l) == c) return true;
    k += l;
  }
  return false;
}

// Python's str.strip/lstrip/rstrip(chars); without chars, JavaScript's trim
// (the reference ignores chars; it strips whitespace either way).
std::string strip(const std::string& s, const CallArgs& a, bool left, bool right) {
  if (a.pos.empty() || a.pos[0].is_none() || a.pos[0].is_undefined()) {
    std::string_view v = s;
    if (left) v = trim_start(v);
    if (right) v = trim_end(v);
    return std::string(v);
  }
  if (!a.pos[0].is(Kind::String)) runtime_error("method 'strip': chars must be a string");
  const std::string& chars = a.pos[0].str();
  size_t b = 0, e = s.size();
  size_t len = 0;
  if (left) {
    while (b < e && has_code_point(chars, s, b, len)) b += len;
  }
  if (right) {
    const std::vector<size_t> at = code_point_starts(std::string_view(s).substr(b, e - b));
    size_t k = at.size() - 1;
    while (k > 0 && has_code_point(chars, s, b + at[k - 1], len)) --k;
    e = b + at[k];
  }
  return s.substr(b, e - b);
}

Value split(Interpreter& in, const std::string& s, const CallArgs& a) {
  const Value* sep = a.get(0, "sep");
  const Value* maxv = a.get(1, "maxsplit");
  int64_t maxsplit = -1;
  if (maxv && !maxv->is_undefined()) {
    if (!maxv->is(Kind::Int)) runtime_error("method 'split': maxsplit must be an integer");
    maxsplit = maxv->as_int();
  }
  Array out;
  if (!sep || sep->is_none() || sep->is_undefined()) {
    std::string_view rest = trim_start(s);
    while (!rest.empty()) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(Value::string(std::string(rest)));
        break;
      }
      size_t i = 0;
      while (i < rest.size() && !space_len_at(rest, i)) i += decode_utf8(rest, i).len;
      out.push_back(Value::string(std::string(rest.substr(0, i))));
      rest = trim_start(rest.substr(i));
    }
  } else {
    if (!sep->is(Kind::String)) runtime_error("method 'split': sep must be a string or none");
    const std::string& d = sep->str();
    if (d.empty()) runtime_error("method 'split': empty separator");
    size_t start = 0;
    for (;;) {
      const size_t at = s.find(d, start);
      if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) {
        out.push_back(Value::string(s.substr(start)));
        break;
      }
      out.push_back(Value::string(s.substr(start, at - start)));
      start = at + d.size();
      in.check_items(out.size());
    }
  }
  in.step(out.size());
  return Value::array(std::move(out));
}

std::string replace(Interpreter& in, const std::string& s, const CallArgs& a) {
  const std::string from = need_string(a, 0, "replace", "the text to replace");
  const std::string to = need_string(a, 1, "replace", "the replacement");
  int64_t count = -1;
  if (const Value* c = a.get(2, "count"); c && !c->is_none() && !c->is_undefined()) {
    if (!c->is(Kind::Int)) runtime_error("method 'replace': count must be an integer");
    count = c->as_int();
  }
  if (count == 0) return s;
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    for (size_t i = 0; i <= s.size();) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i == s.size()) break;
      const size_t len = decode_utf8(s, i).len;
      out.append(s, i, len);
      i += len;
      in.check_string(out.size());
    }
    return out;
  }
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos || (count >= 0 && done >= count)) break;
    out.append(s, start, at - start);
    out += to;
    in.check_string(out.size());
    ++done;
    start = at + from.size();
  }
  out.append(s, start, std::string::npos);
  in.check_string(out.size());
  return out;
}

bool starts_or_ends(const std::string& s, const CallArgs& a, bool starts, const char* method) {
  if (a.pos.empty()) runtime_error(std::string("method '") + method + "' needs an argument");
  auto one = [&](const Value& p) {
    if (!p.is(Kind::String)) runtime_error(std::string("method '") + method + "' takes a string or a tuple of strings");
    const std::string& t = p.str();
    if (t.size() > s.size()) return false;
    return starts ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (a.pos[0].is(Kind::Array)) {
    for (const Value& p : a.pos[0].arr()) if (one(p)) return true;
    return false;
  }
  return one(a.pos[0]);
}

Value string_method(Interpreter& in, const Value& self, std::string_view name) {
  const std::string s = self.str();
  auto fn = [&](auto f) { return Value::function([&in, s, f](const CallArgs& a) { return f(in, s, a); }); };
  if (name == "length") return Value::integer(static_cast<int64_t>(code_point_count(s)));
  if (name == "upper") return fn([](Interpreter&, const std::string& x, const CallArgs&) { return Value::string(ascii_upper(x)); });
  if (name == "lower") return fn([](Interpreter&, const std::string& x, const CallArgs&) { return Value::string(ascii_lower(x)); });
  if (name == "strip") return fn([](Interpreter&, const std::string& x, const CallArgs& a) { return Value::string(strip(x, a, true, true)); });
  if (name == "lstrip") return fn([](Interpreter&, const std::string& x, const CallArgs& a) { return Value::string(strip(x, a, true, false)); });
  if (name == "rstrip") return fn([](Interpreter&, const std::string& x, const CallArgs& a) { return Value::string(strip(x, a, false, true)); });
  if (name == "title" || name == "capitalize") {
    const std::string filter(name);
    return fn([filter](Interpreter& i, const std::string& x, const CallArgs&) {
      return apply_filter(i, Value::string(x), filter, CallArgs{});
    });
  }
  if (name == "startswith") return fn([](Interpreter&, const std::string& x, const CallArgs& a) { return Value::boolean(starts_or_ends(x, a, true, "startswith")); });
  if (name == "endswith") return fn([](Interpreter&, const std::string& x, const CallArgs& a) { return Value::boolean(starts_or_ends(x, a, false, "endswith")); });
  if (name == "split") return fn([](Interpreter& i, const std::string& x, const CallArgs& a) { return split(i, x, a); });
  if (name == "replace") return fn([](Interpreter& i, const std::string& x, const CallArgs& a) { return Value::string(replace(i, x, a)); });
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return fn([find](Interpreter&, const std::string& x, const CallArgs& a) {
      const std::string t = need_string(a, 0, find ? "find" : "count", "the text to look for");
      if (find) {
        const size_t at = x.find(t);
        return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(code_point_count(x.substr(0, at))));
      }
      if (t.empty()) return Value::integer(static_cast<int64_t>(code_point_count(x)) + 1);
      int64_t n = 0;
      for (size_t at = x.find(t); at != std::string::npos; at = x.find(t, at + t.size())) ++n;
      return Value::integer(n);
    });
  }
  if (name == "join") {
    return fn([](Interpreter& i, const std::string& x, const CallArgs& a) {
      if (a.pos.empty() || !a.pos[0].is(Kind::Array)) runtime_error("method 'join' needs a list");
      std::string out;
      for (size_t k = 0; k < a.pos[0].arr().size(); ++k) {
        const Value& e = a.pos[0].arr()[k];
        if (!e.is(Kind::String)) runtime_error("method 'join': list items must be strings");
        if (k) out += x;
        out += e.str();
        i.check_string(out.size());
      }
      return Value::string(std::move(out));
    });
  }
  return Value();
}

Value object_method(Interpreter& in, const Value& self, std::string_view name) {
  auto fn = [&](auto f) { return Value::function([&in, self, f](const CallArgs& a) { return f(in, self, a); }); };
  if (name == "get") {
    return fn([](Interpreter&, const Value& o, const CallArgs& a) {
      if (a.pos.empty() || !a.pos[0].is(Kind::String)) runtime_error("method 'get': the key must be a string");
      if (const Value* v = o.map().find(a.pos[0].str())) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    });
  }
  if (name == "items") {
    return fn([](Interpreter& i, const Value& o, const CallArgs&) {
      Array out;
      for (const auto& [k, v] : o.map().items) out.push_back(Value::array({Value::string(k), v}));
      i.step(out.size());
      return Value::array(std::move(out));
    });
  }
  if (name == "keys") {
    return fn([](Interpreter&, const Value& o, const CallArgs&) {
      Array out;
      for (const auto& [k, v] : o.map().items) out.push_back(Value::string(k));
      return Value::array(std::move(out));
    });
  }
  if (name == "values") {
    return fn([](Interpreter&, const Value& o, const CallArgs&) {
      Array out;
      for (const auto& [k, v] : o.map().items) out.push_back(v);
      return Value::array(std::move(out));
    });
  }
  if (name == "dictsort") {
    return fn([](Interpreter& i, const Value& o, const CallArgs& a) {
      auto flag = [&](size_t k, std::string_view key) {
        const Value* v = a.get(k, key);
        if (v && !v->is(Kind::Bool)) runtime_error("dictsort: '" + std::string(key) + "' must be a boolean");
        return v && v->as_bool();
      };
      const bool case_sensitive = flag(0, "case_sensitive");
      std::string by = "key";
      if (const Value* b = a.get(1, "by")) {
        if (!b->is(Kind::String) || (b->str() != "key" && b->str() != "value")) runtime_error("dictsort: by must be 'key' or 'value'");
        by = b->str();
      }
      const bool reverse = flag(2, "reverse");
      Array out;
      for (const auto& [k, v] : o.map().items) out.push_back(Value::array({Value::string(k), v}));
      const size_t idx = by == "key" ? 0 : 1;
      i.step(out.size() * 4);
      std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
        const int r = compare_values(x.arr()[idx], y.arr()[idx], case_sensitive);
        return reverse ? r > 0 : r < 0;
      });
      return Value::array(std::move(out));
    });
  }
  return Value();
}

}  // namespace

Value builtin_member(Interpreter& in, const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Kind::String: return string_method(in, object, name);
    case Kind::Object: return object_method(in, object, name);
    case Kind::Array:
      if (name == "length") return Value::integer(static_cast<int64_t>(object.arr().size()));
      return Value();
    default: return Value();
  }
}

}  // namespace nexus::tmpl
