// Interpreter: runs a parsed template (ast.h) over a context of Values, with
// @huggingface/jinja's semantics (scoping: a for loop, macro or call block
// opens a scope; `set` inside it does not leak out, namespaces are the way
// out; macros resolve free names where they were defined).
//
// Sandbox: the interpreter has no I/O; every render is bounded by
// RenderLimits (jinja.h): output and string bytes, loop iterations (all
// loops together), evaluation steps, and nesting depth (expressions, blocks
// and macro calls together: recursion cannot overflow the stack). Reaching a
// limit throws TemplateError(Limit) naming it.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "template/ast.h"
#include "template/jinja.h"
#include "template/value.h"

namespace nexus::tmpl {

// A scope: variables, and the scope it sits in (nullptr for the globals).
struct Env {
  Env* parent = nullptr;
  ObjectMap vars;
  const Value* lookup(std::string_view name) const;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {}

  Env* new_env(Env* parent);
  ObjectMap* new_namespace();  // owned by the interpreter (values refer to it)

  std::string render(const NodeList& program, Env* globals);

  // Bookkeeping shared with the filters and globals.
  void step(uint64_t n = 1);        // evaluation work; Limit past max_steps
  void loop_iterations(uint64_t n);  // Limit past max_loop_iterations (all loops of the render)
  void check_string(size_t bytes) const;  // Limit past max_output_bytes
  void check_items(size_t n) const;       // arrays built by the template: at most max_loop_iterations items
  const RenderLimits& limits() const { return limits_; }
  int json_depth() const { return limits_.max_depth; }

  Value eval(const Node& n, Env* env);
  CallArgs eval_args(const NodeList& args, Env* env);
  Value call(const Value& fn, const CallArgs& args, int line);

 private:
  enum class Flow { Normal, Break, Continue };
  struct Depth {
    explicit Depth(Interpreter& in);
    ~Depth() { --in_.depth_; }
    Interpreter& in_;
  };

  Flow render_block(const NodeList& body, Env* env, std::string& out);
  Flow render_for(const Node& n, Env* env, std::string& out);
  void exec_set(const Node& n, Env* env);
  void define_macro(const Node& n, Env* env);
  Value call_block(const Node& n, Env* env);
  void bind_params(const NodeList& params, const CallArgs& args, Env* scope, const std::string& name);
  Value eval_binary(const Node& n, Env* env);
  Value eval_member(const Node& n, Env* env);
  Value eval_slice(const Value& object, const Node& slice, Env* env);
  std::string block_text(const NodeList& body, Env* env);

  RenderLimits limits_;
  uint64_t steps_ = 0, iterations_ = 0;
  int depth_ = 0;
  std::deque<Env> envs_;
  std::deque<ObjectMap> namespaces_;
  Value pending_caller_;  // caller() for the macro a call block is about to run
};

// Filters (filters.cpp): `operand | name(args)`. Throws TemplateError naming
// an unknown filter or a filter that does not apply to the operand's type.
Value apply_filter(Interpreter& in, const Value& operand, const std::string& name, const CallArgs& args);
bool is_known_filter(std::string_view name);

// Tests (tests.cpp): `operand is name(args)`. Unknown test: TemplateError naming it.
bool apply_test(const std::string& name, const Value& operand, const CallArgs& args);

// Attributes of strings, arrays and objects that are not keys: methods
// (`s.strip()`, `d.items()`) and `length` (methods.cpp). Undefined when none.
Value builtin_member(Interpreter& in, const Value& object, std::string_view name);

// The global names (globals.cpp): true/false/none (and True/False/None),
// namespace, range, raise_exception, strftime_now.
void install_globals(Interpreter& in, Env& env, const RenderOptions& opts);

// JavaScript's String(v) of the reference renderer: `~`, string `+`, join.
std::string js_string(const Value& v, int max_depth);

// item.a.b / item.0: the attribute path of sort(attribute=), map(attribute=).
Value attribute_path(const Value& item, std::string_view path);

// Python-style slice of `n` items: the kept indices (utils.ts's slice()).
std::vector<size_t> slice_indices(size_t n, const Value& start, const Value& stop, const Value& step);

}  // namespace nexus::tmpl
