// Value: the runtime value of the Jinja interpreter (jinja.h), with the
// semantics of @huggingface/jinja's runtime (transformers.js), which follows
// Python's Jinja2 for what chat templates use.
//
// Kinds: undefined, none, bool, int (int64), float (double), string (UTF-8),
// array (lists and tuples), object (string keys in insertion order),
// namespace (the one mutable kind: `{% set ns.x = ... %}`), function.
// Strings, arrays and objects are immutable and shared (copying a Value is
// cheap). A namespace is owned by the render's arena (Interpreter) and only
// referred to here, so a namespace that holds itself is no leak.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nexus::tmpl {

class Value;
using Array = std::vector<Value>;

// Insertion-ordered string-keyed map (a JSON object, a Jinja dict).
struct ObjectMap {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value v);
};

// A call's arguments: positional, then keyword ones in call order.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional i, else keyword `name`, else nullptr.
  const Value* get(size_t i, std::string_view name) const;
};

using NativeFn = std::function<Value(const CallArgs&)>;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, Array, Object, Namespace, Function };

class Value {
 public:
  Value() = default;
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value array(Array a);
  static Value object(ObjectMap m);
  static Value namespace_of(ObjectMap* ns);  // not owned
  static Value function(NativeFn fn);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_numeric_like() const { return is_number() || kind_ == Kind::Bool; }  // bool counts as 0/1
  bool is_mapping() const { return kind_ == Kind::Object || kind_ == Kind::Namespace; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const;  // int, float or bool
  const std::string& str() const;
  const Array& arr() const;
  const ObjectMap& map() const;    // object or namespace
  ObjectMap* ns() const { return ns_; }
  const NativeFn& fn() const { return *fn_; }

  // Python/Jinja truthiness: empty string/array/object, 0, none, undefined are false.
  bool truthy() const;
  // The name in error messages: "undefined", "none", "boolean", "integer",
  // "float", "string", "array", "object", "namespace", "function".
  const char* type_name() const;
  // Identity of shared containers (for == on arrays/objects, as JavaScript's ==).
  const void* identity() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const Array> a_;
  std::shared_ptr<const ObjectMap> o_;
  ObjectMap* ns_ = nullptr;
  std::shared_ptr<const NativeFn> fn_;
};

// JSON text options of the `tojson` filter (Python json.dumps's).
struct JsonOptions {
  int indent = -1;                 // < 0: one line
  bool ensure_ascii = false;       // \uXXXX for code points >= 0x7f
  bool sort_keys = false;
  std::string item_sep, key_sep;   // "" = the defaults: ", " (or "," when indenting) and ": "
  bool custom_separators = false;
};

// tojson: throws TemplateError for a function. undefined_as_null=false
// writes `undefined` (how arrays/objects print inside {{ }}). max_depth bounds
// nesting (a namespace can hold itself).
std::string to_json(const Value& v, const JsonOptions& o, bool undefined_as_null, int max_depth);
// A JSON string literal (JSON.stringify's escapes).
std::string json_quote(std::string_view s, bool ensure_ascii);
// What {{ v }} writes: int as digits, float with at least one decimal
// ("1.0"), true/false, arrays/objects as JSON, none/undefined as "".
std::string to_output(const Value& v, int max_depth);
// A float as JavaScript's Number#toString writes it (shortest round trip).
std::string js_number(double d);

// == as @huggingface/jinja: numbers (and booleans) by value, strings by
// content, none == undefined, containers by identity.
bool loose_equals(const Value& a, const Value& b);
// Membership test used by `in` on arrays (JavaScript ===: no bool/number mix).
bool strict_equals(const Value& a, const Value& b);
// Ordering for sort/dictsort (-1, 0, 1); throws TemplateError across types.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

}  // namespace nexus::tmpl
