// A sandboxed Jinja interpreter for chat templates (the GGUF's
// tokenizer.chat_template, Hugging Face's tokenizer_config.json
// chat_template). Semantics follow @huggingface/jinja, the renderer of
// transformers.js and the Hugging Face hub, itself a reading of Python's
// Jinja2 as transformers configures it for chat templates (trim_blocks,
// lstrip_blocks); output is meant to be byte-identical to it
// (tests/test_template_reference.cpp checks real templates against it).
//
// Supported subset:
//   statements  {{ expr }}, {% if/elif/else %}, {% for x in xs [if cond] %}
//               with {% else %}, {% break %}, {% continue %} and `loop`
//               (index, index0, revindex, revindex0, first, last, length,
//               previtem, nextitem), tuple unpacking (`for k, v in d.items()`),
//               {% set %} (also tuples, `ns.attr`, and {% set x %}..{% endset %}),
//               {% macro %} (defaults, varargs, kwargs), {% call %} with caller(),
//               {% filter %}, comments, whitespace control (`-`), {% generation %}
//   expressions literals (strings, ints, floats, lists, tuples, dicts), and or
//               not, == != < > <= >= in, not in, + - * / // % ** ~, `a if c else b`,
//               attributes, subscripts, slices [a:b:c], calls with keyword
//               arguments and */** unpacking, `is [not] test`, `| filter`
//   filters     abs, capitalize, default (d), dictsort, first, float, indent,
//               int, items, join, last, length (count), list, lower, map
//               (attribute=), reject/rejectattr, replace, reverse, safe,
//               select/selectattr, sort, string, title, tojson (indent,
//               ensure_ascii, sort_keys, separators), trim, unique, upper, wordcount
//   tests       boolean, callable, defined, undefined, none, true, false,
//               string, number, integer, float, iterable, mapping, sequence,
//               odd, even, divisibleby, lower, upper, eq/equalto/==, ne, in
//   methods     strings: strip/lstrip/rstrip (optional chars), split, replace,
//               startswith/endswith, upper, lower, title, capitalize, find,
//               count, join, format-free; dicts: get, items, keys, values;
//               `length` of strings, lists and dicts
//   globals     true/false/none (and True/False/None), namespace(...),
//               range(...), raise_exception(msg), strftime_now(fmt)
// An unknown statement, filter, test, method or function fails with a
// TemplateError naming it; nothing is silently skipped.
//
// Sandbox: no I/O (no include/import/extends), no access to anything but the
// context; every render is bounded by RenderLimits below, each limit
// reached is a TemplateError(Limit) that names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/template_error.h"
#include "template/value.h"

namespace nexus::tmpl {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;   // the output, and any one string built on the way
  uint64_t max_loop_iterations = 1'000'000;     // all for-loop iterations of a render together
  uint64_t max_steps = 10'000'000;              // expression evaluations (bounds total work)
  int max_depth = 200;                          // nesting: expressions, blocks and macro calls together
};

struct RenderOptions {
  RenderLimits limits;
  // The time strftime_now formats (local time); -1 = now.
  std::time_t now = -1;
};

struct NodeListHolder;

class Template {
 public:
  // Parses `source`; throws TemplateError(Syntax) with the line.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `context`'s keys as variables (a JSON object: messages,
  // tools, add_generation_prompt, bos_token, ...). Throws TemplateError.
  // Thread-safe: a Template may render on several threads at once.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& opts = {}) const;

 private:
  std::shared_ptr<const NodeListHolder> program_;
};

// JSON -> Value (objects keep their key order, hence ordered_json; numbers
// stay int or float).
Value from_json(const nlohmann::ordered_json& j);

}  // namespace nexus::tmpl
