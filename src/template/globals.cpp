// The global names of a render (jinja.h): constants, namespace(), range(),
// raise_exception(), strftime_now().
#include <array>
#include <ctime>

#include "template/interpreter.h"

namespace nexus::tmpl {

namespace {

Value make_namespace(Interpreter& in, const CallArgs& a) {
  if (a.pos.size() > 1) runtime_error("namespace() takes at most 1 positional argument");
  ObjectMap* ns = in.new_namespace();
  if (a.pos.size() == 1) {
    const Value& src = a.pos[0];
    if (src.is(Kind::Object)) {
      for (const auto& [k, v] : src.map().items) ns->set(k, v);
    } else if (src.is(Kind::Array)) {
      for (const Value& pair : src.arr()) {
        if (!pair.is(Kind::Array) || pair.arr().size() != 2 || !pair.arr()[0].is(Kind::String)) {
          runtime_error("namespace() expects a dict or a list of [key, value] pairs");
        }
        ns->set(pair.arr()[0].str(), pair.arr()[1]);
      }
    } else {
      runtime_error(std::string("namespace() cannot take a ") + src.type_name());
    }
  }
  for (const auto& [k, v] : a.kw) ns->set(k, v);
  return Value::namespace_of(ns);
}

Value range(Interpreter& in, const CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3) runtime_error("range() takes 1 to 3 integer arguments");
  for (const Value& v : a.pos) {
    if (!v.is(Kind::Int)) runtime_error(std::string("range() takes integers, not a ") + v.type_name());
  }
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) runtime_error("range() step must not be zero");
  // Size first: a huge range is refused before anything is built.
  const long double n = step > 0 ? (stop > start ? (static_cast<long double>(stop) - start + step - 1) / step : 0)
                                  : (stop < start ? (static_cast<long double>(start) - stop - step - 1) / -step : 0);
  in.check_items(static_cast<size_t>(std::min<long double>(n, 1e18L)));
  Array out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, step, &i)) break;
    i -= step;
  }
  in.step(out.size());
  return Value::array(std::move(out));
}

// The directives of the reference's strftime: %Y %m %d %b %B %H %M %%.
std::string strftime_reference(std::time_t t, const std::string& fmt) {
  static constexpr std::array<const char*, 12> kLong = {"January", "February", "March",     "April",   "May",      "June",
                                                         "July",    "August",   "September", "October", "November", "December"};
  static constexpr std::array<const char*, 12> kShort = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm tm{};
  localtime_r(&t, &tm);
  auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out += fmt[i];
      continue;
    }
    const char d = fmt[i + 1];
    switch (d) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += kShort[static_cast<size_t>(tm.tm_mon)]; break;
      case 'B': out += kLong[static_cast<size_t>(tm.tm_mon)]; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += '%'; break;
      default: out += '%'; out += d; break;
    }
    ++i;
  }
  return out;
}

}  // namespace

void install_globals(Interpreter& in, Env& env, const RenderOptions& opts) {
  env.vars.set("true", Value::boolean(true));
  env.vars.set("false", Value::boolean(false));
  env.vars.set("none", Value::none());
  env.vars.set("True", Value::boolean(true));
  env.vars.set("False", Value::boolean(false));
  env.vars.set("None", Value::none());
  env.vars.set("namespace", Value::function([&in](const CallArgs& a) { return make_namespace(in, a); }));
  env.vars.set("range", Value::function([&in](const CallArgs& a) { return range(in, a); }));
  env.vars.set("raise_exception", Value::function([](const CallArgs& a) -> Value {
    const std::string msg = a.pos.empty() ? "raise_exception() called" : to_output(a.pos[0], 8);
    throw TemplateError(TemplateError::Kind::Raised, msg);
  }));
  const std::time_t now = opts.now >= 0 ? opts.now : std::time(nullptr);
  env.vars.set("strftime_now", Value::function([now](const CallArgs& a) {
    if (a.pos.empty() || !a.pos[0].is(Kind::String)) runtime_error("strftime_now() needs a format string");
    return Value::string(strftime_reference(now, a.pos[0].str()));
  }));
}

}  // namespace nexus::tmpl
