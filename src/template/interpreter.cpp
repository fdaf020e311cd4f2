#include "template/interpreter.h"

#include <cmath>
#include <limits>

#include "template/utf8.h"

namespace nexus::tmpl {

namespace {

[[noreturn]] void limit_error(const std::string& what) { throw TemplateError(TemplateError::Kind::Limit, what); }

[[noreturn]] void fail_at(int line, const std::string& what) {
  runtime_error(what + " (template line " + std::to_string(line) + ")");
}

std::string raw_string(const Value& v, int max_depth) { return js_string(v, max_depth); }

bool checked_int(const std::string& op, int64_t a, int64_t b, int64_t& r) {
  if (op == "+") return !__builtin_add_overflow(a, b, &r);
  if (op == "-") return !__builtin_sub_overflow(a, b, &r);
  return !__builtin_mul_overflow(a, b, &r);
}

}  // namespace

std::string js_string(const Value& v, int max_depth) {
  switch (v.kind()) {
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return js_number(v.as_double());
    case Kind::Bool: return v.as_bool() ? "true" : "false";
    case Kind::String: return v.str();
    default: return to_output(v, max_depth);
  }
}

Value attribute_path(const Value& item, std::string_view path) {
  Value v = item;
  size_t pos = 0;
  for (;;) {
    const size_t dot = path.find('.', pos);
    const std::string_view part = path.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    if (v.is_mapping()) {
      const Value* x = v.map().find(part);
      if (!x) return Value();
      v = *x;
    } else if (v.is(Kind::Array)) {
      size_t idx = 0;
      if (part.empty() || part.size() > 9) return Value();
      for (char c : part) {
        if (c < '0' || c > '9') return Value();
        idx = idx * 10 + static_cast<size_t>(c - '0');
      }
      if (idx >= v.arr().size()) return Value();
      v = v.arr()[idx];
    } else {
      return Value();
    }
    if (dot == std::string_view::npos) return v;
    pos = dot + 1;
  }
}

const Value* Env::lookup(std::string_view name) const {
  for (const Env* e = this; e; e = e->parent) {
    if (const Value* v = e->vars.find(name)) return v;
  }
  return nullptr;
}

Interpreter::Depth::Depth(Interpreter& in) : in_(in) {
  if (++in_.depth_ > in_.limits_.max_depth) {
    --in_.depth_;
    limit_error("template nesting exceeded " + std::to_string(in_.limits_.max_depth) +
                " levels (endless macro recursion?)");
  }
}

Env* Interpreter::new_env(Env* parent) {
  envs_.emplace_back();
  envs_.back().parent = parent;
  return &envs_.back();
}

ObjectMap* Interpreter::new_namespace() {
  namespaces_.emplace_back();
  return &namespaces_.back();
}

void Interpreter::step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    limit_error("template exceeded " + std::to_string(limits_.max_steps) + " evaluation steps (an endless or huge loop?)");
  }
}

void Interpreter::loop_iterations(uint64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations) {
    limit_error("template exceeded " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
  }
}

void Interpreter::check_string(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    limit_error("template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

void Interpreter::check_items(size_t n) const {
  if (n > limits_.max_loop_iterations) {
    limit_error("template built a list of more than " + std::to_string(limits_.max_loop_iterations) + " items");
  }
}

std::string Interpreter::render(const NodeList& program, Env* globals) {
  std::string out;
  render_block(program, globals, out);
  return out;
}

std::string Interpreter::block_text(const NodeList& body, Env* env) {
  std::string s;
  render_block(body, env, s);
  return s;
}

Interpreter::Flow Interpreter::render_block(const NodeList& body, Env* env, std::string& out) {
  Depth guard(*this);
  for (const NodePtr& p : body) {
    const Node& n = *p;
    step();
    switch (n.kind) {
      case NodeKind::Text: out += n.str; break;
      case NodeKind::If: {
        const bool c = eval(*n.a, env).truthy();
        const Flow f = render_block(c ? n.body : n.alt, env, out);
        if (f != Flow::Normal) return f;
        break;
      }
      case NodeKind::For: render_for(n, env, out); break;
      case NodeKind::Set: exec_set(n, env); break;
      case NodeKind::Macro: define_macro(n, env); break;
      case NodeKind::Break: return Flow::Break;
      case NodeKind::Continue: return Flow::Continue;
      default: {
        const Value v = eval(n, env);
        if (!v.is_none() && !v.is_undefined()) out += to_output(v, limits_.max_depth);
      }
    }
    check_string(out.size());
  }
  return Flow::Normal;
}

namespace {

void bind_target(const Node& target, const Value& item, Env* scope) {
  if (target.kind == NodeKind::Ident) {
    scope->vars.set(target.str, item);
    return;
  }
  const Array& parts = item.arr();
  for (size_t j = 0; j < target.list.size(); ++j) {
    if (target.list[j]->kind != NodeKind::Ident) fail_at(target.line, "cannot unpack into a non-identifier");
    scope->vars.set(target.list[j]->str, j < parts.size() ? parts[j] : Value());
  }
}

}  // namespace

Interpreter::Flow Interpreter::render_for(const Node& n, Env* env, std::string& out) {
  Env* scope = new_env(env);
  const Value iterable = eval(*n.b, scope);
  Array candidates;
  if (iterable.is(Kind::Array)) {
    candidates = iterable.arr();
  } else if (iterable.is(Kind::Object)) {
    for (const auto& [k, v] : iterable.map().items) candidates.push_back(Value::string(k));
  } else if (iterable.is(Kind::String)) {
    const std::string& s = iterable.str();
    for (size_t i = 0; i < s.size();) {
      const size_t len = decode_utf8(s, i).len;
      candidates.push_back(Value::string(s.substr(i, len)));
      i += len;
    }
  } else {
    fail_at(n.line, std::string("cannot iterate over a value of type ") + iterable.type_name());
  }
  Array items;
  Env* test_scope = n.c ? new_env(scope) : nullptr;
  for (const Value& item : candidates) {
    if (n.a->kind == NodeKind::TupleLit) {
      if (!item.is(Kind::Array)) fail_at(n.line, std::string("cannot unpack a value of type ") + item.type_name());
      if (item.arr().size() != n.a->list.size()) {
        fail_at(n.line, std::string("too ") + (n.a->list.size() > item.arr().size() ? "few" : "many") +
                            " items to unpack in the loop variables");
      }
    }
    if (test_scope) {
      loop_iterations(1);
      test_scope->vars.items.clear();
      bind_target(*n.a, item, test_scope);
      if (!eval(*n.c, test_scope).truthy()) continue;
    }
    items.push_back(item);
  }
  bool iterated = false;
  const auto len = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < len; ++i) {
    loop_iterations(1);
    ObjectMap loop;
    loop.items.reserve(9);
    loop.items.emplace_back("index", Value::integer(i + 1));
    loop.items.emplace_back("index0", Value::integer(i));
    loop.items.emplace_back("revindex", Value::integer(len - i));
    loop.items.emplace_back("revindex0", Value::integer(len - i - 1));
    loop.items.emplace_back("first", Value::boolean(i == 0));
    loop.items.emplace_back("last", Value::boolean(i == len - 1));
    loop.items.emplace_back("length", Value::integer(len));
    loop.items.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
    loop.items.emplace_back("nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value());
    scope->vars.set("loop", Value::object(std::move(loop)));
    bind_target(*n.a, items[static_cast<size_t>(i)], scope);
    const Flow f = render_block(n.body, scope, out);
    if (f == Flow::Continue) continue;
    if (f == Flow::Break) break;
    iterated = true;  // as the reference: a loop whose every pass ended in continue/break runs its else block
  }
  if (!iterated) render_block(n.alt, scope, out);
  return Flow::Normal;
}

void Interpreter::exec_set(const Node& n, Env* env) {
  const Value rhs = n.b ? eval(*n.b, env) : Value::string(block_text(n.body, env));
  const Node& target = *n.a;
  switch (target.kind) {
    case NodeKind::Ident: env->vars.set(target.str, rhs); return;
    case NodeKind::TupleLit: {
      if (!rhs.is(Kind::Array)) fail_at(n.line, std::string("cannot unpack a value of type ") + rhs.type_name());
      if (rhs.arr().size() != target.list.size()) {
        fail_at(n.line, std::string("too ") + (target.list.size() > rhs.arr().size() ? "few" : "many") +
                            " items to unpack in set");
      }
      bind_target(target, rhs, env);
      return;
    }
    case NodeKind::Member: {
      const Value object = eval(*target.a, env);
      if (!object.is(Kind::Namespace)) {
        fail_at(n.line, std::string("cannot assign an attribute of a ") + object.type_name() + " (only of a namespace)");
      }
      if (target.flag || target.b->kind != NodeKind::Ident) fail_at(n.line, "a namespace attribute must be a name");
      object.ns()->set(target.b->str, rhs);
      return;
    }
    default: fail_at(n.line, "invalid target of set");
  }
}

void Interpreter::bind_params(const NodeList& params, const CallArgs& args, Env* scope, const std::string& name) {
  std::vector<std::pair<std::string, Value>> kw = args.kw;
  std::vector<const Node*> pending;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    Value v;
    bool have = false;
    if (i < args.pos.size()) {
      v = args.pos[i];
      have = true;
    } else {
      for (auto it = kw.begin(); it != kw.end(); ++it) {
        if (it->first == p.str) {
          v = it->second;
          kw.erase(it);
          have = true;
          break;
        }
      }
    }
    if (!have && p.kind == NodeKind::Kwarg) pending.push_back(&p);
    scope->vars.set(p.str, v);
  }
  ObjectMap kwargs;
  for (auto& [k, v] : kw) kwargs.set(k, v);
  scope->vars.set("kwargs", Value::object(std::move(kwargs)));
  Array varargs;
  for (size_t i = params.size(); i < args.pos.size(); ++i) varargs.push_back(args.pos[i]);
  scope->vars.set("varargs", Value::array(std::move(varargs)));
  for (const Node* p : pending) scope->vars.set(p->str, eval(*p->a, scope));
  (void)name;
}

void Interpreter::define_macro(const Node& n, Env* env) {
  const Node* node = &n;
  env->vars.set(n.str, Value::function([this, node, env](const CallArgs& args) {
    Depth guard(*this);
    Env* scope = new_env(env);
    Value caller = std::move(pending_caller_);
    pending_caller_ = Value();
    if (!caller.is_undefined()) scope->vars.set("caller", caller);
    bind_params(node->list, args, scope, node->str);
    return Value::string(block_text(node->body, scope));
  }));
}

Value Interpreter::call_block(const Node& n, Env* env) {
  const Node* node = &n;
  Value caller = Value::function([this, node, env](const CallArgs& args) {
    Depth guard(*this);
    Env* scope = new_env(env);
    bind_params(node->list, args, scope, "caller");
    return Value::string(block_text(node->body, scope));
  });
  const Node& call_node = *n.a;
  CallArgs args = eval_args(call_node.list, env);
  const Value fn = eval(*call_node.a, env);
  if (!fn.is(Kind::Function)) fail_at(n.line, "unknown macro '" + call_node.a->str + "' in call block");
  pending_caller_ = std::move(caller);
  Value r = call(fn, args, n.line);
  pending_caller_ = Value();
  return r;
}

CallArgs Interpreter::eval_args(const NodeList& args, Env* env) {
  CallArgs out;
  for (const NodePtr& a : args) {
    if (a->kind == NodeKind::Spread) {
      const Value v = eval(*a->a, env);
      if (!v.is(Kind::Array)) fail_at(a->line, std::string("cannot unpack a ") + v.type_name() + " with *");
      for (const Value& x : v.arr()) out.pos.push_back(x);
    } else if (a->kind != NodeKind::Kwarg && a->kind != NodeKind::KwSpread) {
      out.pos.push_back(eval(*a, env));
    }
  }
  auto add_kw = [&](const std::string& k, Value v, int line) {
    for (const auto& e : out.kw) {
      if (e.first == k) fail_at(line, "multiple values for keyword argument '" + k + "'");
    }
    out.kw.emplace_back(k, std::move(v));
  };
  for (const NodePtr& a : args) {
    if (a->kind == NodeKind::Kwarg) {
      add_kw(a->str, eval(*a->a, env), a->line);
    } else if (a->kind == NodeKind::KwSpread) {
      const Value v = eval(*a->a, env);
      if (!v.is(Kind::Object)) fail_at(a->line, std::string("the argument after ** must be a dict, not a ") + v.type_name());
      for (const auto& [k, x] : v.map().items) add_kw(k, x, a->line);
    }
  }
  return out;
}

Value Interpreter::call(const Value& fn, const CallArgs& args, int line) {
  if (!fn.is(Kind::Function)) fail_at(line, std::string("cannot call a value of type ") + fn.type_name());
  return fn.fn()(args);
}

Value Interpreter::eval_slice(const Value& object, const Node& slice, Env* env) {
  Value parts[3];
  for (size_t k = 0; k < 3 && k < slice.list.size(); ++k) {
    if (slice.list[k]) parts[k] = eval(*slice.list[k], env);
    if (!parts[k].is_undefined() && !parts[k].is(Kind::Int)) fail_at(slice.line, "slice indices must be integers");
  }
  if (object.is(Kind::Array)) {
    const Array& a = object.arr();
    Array out;
    for (size_t i : slice_indices(a.size(), parts[0], parts[1], parts[2])) out.push_back(a[i]);
    return Value::array(std::move(out));
  }
  if (object.is(Kind::String)) {
    const std::string& s = object.str();
    const std::vector<size_t> at = code_point_starts(s);
    std::string out;
    for (size_t i : slice_indices(at.size() - 1, parts[0], parts[1], parts[2])) out.append(s, at[i], at[i + 1] - at[i]);
    return Value::string(std::move(out));
  }
  fail_at(slice.line, std::string("cannot slice a value of type ") + object.type_name());
}

std::vector<size_t> slice_indices(size_t n_items, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const auto n = static_cast<int64_t>(n_items);
  const int64_t step = step_v.is(Kind::Int) ? step_v.as_int() : 1;
  std::vector<size_t> out;
  if (step == 0) return out;  // the reference loops zero times
  int64_t start, stop;
  if (step > 0) {
    start = start_v.is(Kind::Int) ? start_v.as_int() : 0;
    start = start < 0 ? std::max<int64_t>(n + start, 0) : std::min(start, n);
    stop = stop_v.is(Kind::Int) ? stop_v.as_int() : n;
    stop = stop < 0 ? std::max<int64_t>(n + stop, 0) : std::min(stop, n);
    for (int64_t i = start; i < stop; i += step) out.push_back(static_cast<size_t>(i));
  } else {
    start = start_v.is(Kind::Int) ? start_v.as_int() : n - 1;
    start = start < 0 ? std::max<int64_t>(n + start, -1) : std::min(start, n - 1);
    stop = stop_v.is(Kind::Int) ? stop_v.as_int() : -1;
    stop = stop < -1 ? std::max<int64_t>(n + stop, -1) : std::min(stop, n - 1);
    for (int64_t i = start; i > stop; i += step) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

namespace {

// object[property] / object.property, without the call.
Value member_of(Interpreter& in, const Value& object, const Value& property, int line) {
  if (object.is_mapping()) {
    if (!property.is(Kind::String)) {
      fail_at(line, std::string("a dict key must be a string, not a ") + property.type_name());
    }
    if (const Value* v = object.map().find(property.str())) return *v;
    return object.is(Kind::Object) ? builtin_member(in, object, property.str()) : Value();
  }
  if (object.is(Kind::Array) || object.is(Kind::String)) {
    if (property.is(Kind::Int)) {
      int64_t i = property.as_int();
      if (object.is(Kind::Array)) {
        const auto n = static_cast<int64_t>(object.arr().size());
        if (i < 0) i += n;
        return i >= 0 && i < n ? object.arr()[static_cast<size_t>(i)] : Value();
      }
      const std::vector<size_t> at = code_point_starts(object.str());
      const auto n = static_cast<int64_t>(at.size() - 1);
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      const auto k = static_cast<size_t>(i);
      return Value::string(object.str().substr(at[k], at[k + 1] - at[k]));
    }
    if (property.is(Kind::String)) return builtin_member(in, object, property.str());
    fail_at(line, std::string("cannot index a ") + object.type_name() + " with a " + property.type_name());
  }
  if (!property.is(Kind::String)) {
    fail_at(line, std::string("cannot index a ") + object.type_name() + " with a " + property.type_name());
  }
  return builtin_member(in, object, property.str());
}

}  // namespace

Value Interpreter::eval_member(const Node& n, Env* env) {
  const Value object = eval(*n.a, env);
  if (n.flag && n.b->kind == NodeKind::Slice) return eval_slice(object, *n.b, env);
  Value property;
  if (n.flag) property = eval(*n.b, env);
  else if (n.b->kind == NodeKind::Int) property = Value::integer(n.b->i);
  else property = Value::string(n.b->str);
  return member_of(*this, object, property, n.line);
}

Value Interpreter::eval_binary(const Node& n, Env* env) {
  const std::string& op = n.str;
  const Value l = eval(*n.a, env);
  if (op == "and") return l.truthy() ? eval(*n.b, env) : l;
  if (op == "or") return l.truthy() ? l : eval(*n.b, env);
  const Value r = eval(*n.b, env);
  if (op == "==") return Value::boolean(loose_equals(l, r));
  if (op == "!=") return Value::boolean(!loose_equals(l, r));
  const int md = limits_.max_depth;
  if (l.is_number() && r.is_number() && op != "~" && op != "**") {
    const bool is_float = l.is(Kind::Float) || r.is(Kind::Float);
    const double a = l.as_double(), b = r.as_double();
    if (op == "+" || op == "-" || op == "*") {
      if (!is_float) {
        int64_t res;
        if (!checked_int(op, l.as_int(), r.as_int(), res)) fail_at(n.line, "integer overflow in '" + op + "'");
        return Value::integer(res);
      }
      return Value::number(op == "+" ? a + b : op == "-" ? a - b : a * b);
    }
    if (op == "/") {
      if (b == 0) fail_at(n.line, "division by zero");
      return Value::number(a / b);
    }
    if (op == "//" || op == "%") {
      if (b == 0) fail_at(n.line, op == "%" ? "modulo by zero" : "division by zero");
      if (!is_float) {
        const int64_t x = l.as_int(), y = r.as_int();
        if (x == std::numeric_limits<int64_t>::min() && y == -1) fail_at(n.line, "integer overflow in '" + op + "'");
        if (op == "%") return Value::integer(x % y);  // JavaScript's remainder (sign of the dividend)
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::integer(q);
      }
      return Value::number(op == "%" ? std::fmod(a, b) : std::floor(a / b));
    }
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
  } else if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    if (op == "~" && !l.is_none() && !r.is_none()) {
      std::string s = (l.is_undefined() ? "" : raw_string(l, md)) + (r.is_undefined() ? "" : raw_string(r, md));
      check_string(s.size());
      return Value::string(std::move(s));
    }
    fail_at(n.line, "cannot apply '" + op + "' to an undefined value");
  } else if (l.is_none() || r.is_none()) {
    if (r.is(Kind::Array) && (op == "in" || op == "not in")) {
      // (falls through to membership below)
    } else {
      fail_at(n.line, "cannot apply '" + op + "' to none");
    }
  } else if (op == "~") {
    std::string s = raw_string(l, md) + raw_string(r, md);
    check_string(s.size());
    return Value::string(std::move(s));
  } else if (op == "**" && l.is_numeric_like() && r.is_numeric_like()) {
    const double a = l.as_double(), b = r.as_double();
    if (a == 0 && b < 0) fail_at(n.line, "0 cannot be raised to a negative power");
    const double res = std::pow(a, b);
    if (!std::isfinite(res)) fail_at(n.line, "exponentiation result is not a finite real number");
    const bool is_float = l.is(Kind::Float) || r.is(Kind::Float) || b < 0;
    if (!is_float && std::fabs(res) > 9.007199254740992e15) fail_at(n.line, "integer overflow in '**'");
    return is_float ? Value::number(res) : Value::integer(static_cast<int64_t>(res));
  }
  if (l.is(Kind::Array) && r.is(Kind::Array) && op == "+") {
    check_items(l.arr().size() + r.arr().size());
    step(l.arr().size() + r.arr().size());
    Array out = l.arr();
    out.insert(out.end(), r.arr().begin(), r.arr().end());
    return Value::array(std::move(out));
  }
  if (r.is(Kind::Array) && (op == "in" || op == "not in")) {
    step(r.arr().size());
    bool member = false;
    for (const Value& x : r.arr()) {
      if (strict_equals(x, l)) {
        member = true;
        break;
      }
    }
    return Value::boolean(member == (op == "in"));
  }
  if ((l.is(Kind::String) || r.is(Kind::String)) && op == "+") {
    std::string s = raw_string(l, md) + raw_string(r, md);
    check_string(s.size());
    return Value::string(std::move(s));
  }
  if (l.is(Kind::String) && r.is(Kind::String)) {
    if (op == "in" || op == "not in") return Value::boolean((r.str().find(l.str()) != std::string::npos) == (op == "in"));
    // String ordering (Python's; the reference refuses it).
    const int c = l.str().compare(r.str());
    if (op == "<") return Value::boolean(c < 0);
    if (op == ">") return Value::boolean(c > 0);
    if (op == "<=") return Value::boolean(c <= 0);
    if (op == ">=") return Value::boolean(c >= 0);
  }
  if (l.is(Kind::String) && r.is(Kind::Object) && (op == "in" || op == "not in")) {
    return Value::boolean((r.map().find(l.str()) != nullptr) == (op == "in"));
  }
  fail_at(n.line, "unsupported operator '" + op + "' between " + l.type_name() + " and " + r.type_name());
}

Value Interpreter::eval(const Node& n, Env* env) {
  Depth guard(*this);
  step();
  switch (n.kind) {
    case NodeKind::Text:
    case NodeKind::String: return Value::string(n.str);
    case NodeKind::Int: return Value::integer(n.i);
    case NodeKind::Float: return Value::number(n.f);
    case NodeKind::Ident: {
      const Value* v = env->lookup(n.str);
      return v ? *v : Value();
    }
    case NodeKind::ArrayLit:
    case NodeKind::TupleLit: {
      Array a;
      a.reserve(n.list.size());
      for (const NodePtr& e : n.list) a.push_back(eval(*e, env));
      return Value::array(std::move(a));
    }
    case NodeKind::ObjectLit: {
      ObjectMap m;
      for (size_t k = 0; k + 1 < n.list.size(); k += 2) {
        const Value key = eval(*n.list[k], env);
        if (!key.is(Kind::String)) fail_at(n.line, std::string("dict keys must be strings, not ") + key.type_name());
        m.set(key.str(), eval(*n.list[k + 1], env));
      }
      return Value::object(std::move(m));
    }
    case NodeKind::Member: return eval_member(n, env);
    case NodeKind::Call: {
      const CallArgs args = eval_args(n.list, env);
      const Node& callee = *n.a;
      Value fn;
      if (callee.kind == NodeKind::Member && !callee.flag && callee.b->kind == NodeKind::Ident) {
        const Value object = eval(*callee.a, env);
        fn = member_of(*this, object, Value::string(callee.b->str), callee.line);
        if (fn.is_undefined()) {
          fail_at(n.line, "unknown method '" + callee.b->str + "' of a " + object.type_name());
        }
      } else {
        fn = eval(callee, env);
        if (fn.is_undefined() && callee.kind == NodeKind::Ident) fail_at(n.line, "unknown function '" + callee.str + "'");
      }
      return call(fn, args, n.line);
    }
    case NodeKind::Filter: {
      const Value operand = eval(*n.a, env);
      const CallArgs args = eval_args(n.list, env);
      try {
        return apply_filter(*this, operand, n.str, args);
      } catch (const TemplateError& e) {
        if (e.kind() != TemplateError::Kind::Runtime) throw;
        fail_at(n.line, e.what());
      }
    }
    case NodeKind::Test: {
      const Value operand = eval(*n.a, env);
      const CallArgs args = eval_args(n.list, env);
      bool r;
      try {
        r = apply_test(n.str, operand, args);
      } catch (const TemplateError& e) {
        if (e.kind() != TemplateError::Kind::Runtime) throw;
        fail_at(n.line, e.what());
      }
      return Value::boolean(n.flag ? !r : r);
    }
    case NodeKind::Unary: {
      const Value v = eval(*n.a, env);
      if (n.str == "not") return Value::boolean(!v.truthy());
      const bool neg = n.str == "-";
      if (v.is(Kind::Float)) return Value::number(neg ? -v.as_double() : v.as_double());
      if (v.is(Kind::Int) || v.is(Kind::Bool)) {
        const int64_t x = v.is(Kind::Bool) ? (v.as_bool() ? 1 : 0) : v.as_int();
        if (neg && x == std::numeric_limits<int64_t>::min()) fail_at(n.line, "integer overflow in unary '-'");
        return Value::integer(neg ? -x : x);
      }
      fail_at(n.line, "unary '" + n.str + "' of a " + v.type_name());
    }
    case NodeKind::Binary: return eval_binary(n, env);
    case NodeKind::Ternary: return eval(*n.a, env).truthy() ? eval(*n.b, env) : eval(*n.c, env);
    case NodeKind::Select: return eval(*n.b, env).truthy() ? eval(*n.a, env) : Value();
    case NodeKind::CallBlock: return call_block(n, env);
    case NodeKind::FilterBlock: {
      const Value body = Value::string(block_text(n.body, env));
      const CallArgs args = eval_args(n.a->list, env);
      return apply_filter(*this, body, n.a->str, args);
    }
    default: fail_at(n.line, "this statement cannot be used as an expression");
  }
}

}  // namespace nexus::tmpl
