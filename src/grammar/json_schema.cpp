#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/schema_numeric_range.h"
#include "grammar/schema_pattern.h"
#include "util/error.h"

namespace nexus::grammar {
namespace {

using json = nlohmann::ordered_json;

// Rules every schema grammar may use, the pieces of RFC 8259. Whitespace
// between tokens is one space, or a newline and an indent of at most 20
// (llama.cpp's choice), so a model cannot pad forever; strings exclude raw
// control characters as the RFC requires; numbers follow the RFC's grammar
// (no leading zeros, no bare '.') within a double's range (at most 16
// integer digits and a positive exponent of at most 2 digits: below 1e115,
// so no parser reads infinity; nlohmann refuses 8e721) and with at most 16
// fraction digits (a double holds 17 significant digits; stories260K
// otherwise writes -3.1000... until max_tokens).

// The whitespace between JSON tokens: free (a space, or a newline and up
// to 20 of indentation), or none (compact, as OpenAI's strict mode writes
// tool arguments).
constexpr const char* kWsFree = "\nws          ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?";
constexpr const char* kWsCompact = "\nws          ::= \"\"";
constexpr const char* kBaseRules = R"gbnf(
json-value  ::= json-object | json-array | json-string | json-number | "true" ws | "false" ws | "null" ws
json-object ::= "{" ws ( json-member ( "," ws json-member )* )? "}" ws
json-member ::= json-string ":" ws json-value
json-array  ::= "[" ws ( json-value ( "," ws json-value )* )? "]" ws
json-string ::= "\"" json-char* "\"" ws
json-char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-int    ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ws
json-number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] ( "-" [0-9]{1,3} | "+"? [0-9]{1,2} ) )? ws
json-bool   ::= ( "true" | "false" ) ws
json-null   ::= "null" ws
date        ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )
time        ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
uuid        ::= [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}
)gbnf";

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title",   "description", "default",  "examples",  "$comment",
                                          "$schema", "$id",         "deprecated", "readOnly", "writeOnly"};
  return k;
}

// The keywords that apply to one type only (JSON Schema 2020-12 validation
// vocabulary), by type ("number" covers "integer").
const std::vector<std::pair<std::string, std::vector<const char*>>>& type_keywords() {
  static const std::vector<std::pair<std::string, std::vector<const char*>>> k = {
      {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
      {"string", {"minLength", "maxLength", "pattern", "format"}},
      {"array", {"items", "prefixItems", "minItems", "maxItems"}},
      {"object", {"properties", "required", "additionalProperties"}},
  };
  return k;
}

// A GBNF literal for the bytes of `s`.
std::string literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Nesting bounds. The compiler recurses once per subschema (and per $ref it
// follows), and nlohmann's dump() and copies once per level of a value, so
// an unbounded depth overflows the stack: a 75 KB request of nested `items`
// crashed `nexus serve`. The document (const / enum values and annotations
// included) is measured without recursion before anything else.
constexpr size_t kMaxDepth = 128;

void check_document_depth(const json& root) {
  std::vector<std::pair<const json*, size_t>> todo{{&root, 1}};
  while (!todo.empty()) {
    const auto [v, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxDepth)
      throw Error(fmt::format("#: the schema is nested deeper than {} levels, which is not supported", kMaxDepth));
    if (v->is_structured())
      for (const json& child : *v) todo.emplace_back(&child, depth + 1);
  }
}

class Compiler {
 public:
  explicit Compiler(const json& root, std::string prefix = "") : root_(root), prefix_(std::move(prefix)) {
    check_document_depth(root_);
  }

  // No whitespace before the value (as json_object mode): the OpenAI SDKs
  // parse the streamed content after every delta, and openai-node's
  // partial parser throws on whitespace-only text ("  is empty",
  // openai/openai-node#1351), which a leading " " token was.
  std::string run() {
    const std::string top = rule_for(root_, "#");
    return fmt::format("root ::= {}\n{}{}", top, rules_, json_schema_base_gbnf());
  }
  // The $ref a rule of run()'s text was made for ("" when none).
  std::string ref_of_rule(const std::string& rule) const {
    for (const auto& [ref, name] : refs_)
      if (name == rule) return ref;
    return "";
  }

  SchemaRules rules() {
    SchemaRules out;
    out.top = rule_for(root_, "#");
    out.rules = rules_;
    return out;
  }

 private:
  [[noreturn]] static void unsupported(const std::string& where, const std::string& what) {
    throw Error(fmt::format("{}: {}", where, what));
  }

  // A new rule holding `body`; returns its name.
  std::string add(const std::string& body) {
    const std::string name = fmt::format("{}s{}", prefix_, n_++);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  std::string ref_rule(const std::string& ref, const std::string& where) {
    auto it = refs_.find(ref);
    if (it != refs_.end()) return it->second;
    const json* target = nullptr;
    for (const char* section : {"$defs", "definitions"}) {
      const std::string p = fmt::format("#/{}/", section);
      if (ref.rfind(p, 0) != 0) continue;
      const auto defs = root_.find(section);
      if (defs == root_.end() || !defs->is_object()) continue;
      const auto it = defs->find(ref.substr(p.size()));
      if (it != defs->end()) target = &*it;
    }
    if (ref == "#") target = &root_;
    if (!target) unsupported(where, fmt::format("'$ref' to '{}' is not supported (only #, #/$defs/NAME, #/definitions/NAME)", ref));
    // Named before it is compiled, so recursion refers to it.
    const std::string name = fmt::format("{}s{}", prefix_, n_++);
    refs_[ref] = name;
    const std::string body = body_for(*target, ref);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  std::string rule_for(const json& s, const std::string& where) { return add(body_for(s, where)); }

  void check_keywords(const json& s, const std::string& where, std::initializer_list<const char*> allowed) {
    for (const auto& [k, v] : s.items()) {
      if (annotations().count(k)) continue;
      bool ok = false;
      for (const char* a : allowed) ok = ok || k == a;
      if (!ok) unsupported(where, fmt::format("'{}' is not supported here", k));
    }
  }

  static int64_t count(const json& s, const char* key, const std::string& where, int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      unsupported(where, fmt::format("'{}' must be a non-negative integer", key));
    if (v.get<int64_t>() > kMaxRepeat) unsupported(where, fmt::format("'{}' above {} is not supported", key, kMaxRepeat));
    return v.get<int64_t>();
  }

  static std::string repeat(const std::string& item, int64_t lo, int64_t hi) {  // hi < 0: unbounded
    if (hi < 0) return fmt::format("{}{{{},}}", item, lo);
    return fmt::format("{}{{{},{}}}", item, lo, hi);
  }

  // false, or {"not": {}} / {"not": true} (with annotations at most): a
  // schema no value is valid against. Only as a branch of anyOf / oneOf,
  // where it can be left out; `not` is refused anywhere else.
  static bool matches_nothing(const json& s) {
    if (s.is_boolean()) return !s.get<bool>();
    if (!s.is_object() || !s.contains("not")) return false;
    for (const auto& [k, v] : s.items())
      if (k != "not" && !annotations().count(k)) return false;
    const json& n = s.at("not");
    return (n.is_boolean() && n.get<bool>()) || (n.is_object() && n.empty());
  }

  std::string body_for(const json& s, const std::string& where) {
    // Subschemas within subschemas, and $refs followed (a chain of $defs
    // that refer to each other nests without a deep document).
    struct Nesting {
      int& n;
      explicit Nesting(int& depth) : n(++depth) {}
      ~Nesting() { --n; }
    } nesting(depth_);
    if (static_cast<size_t>(depth_) > kMaxDepth)
      unsupported(where, fmt::format("subschemas (and $refs) nested deeper than {} levels are not supported", kMaxDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) unsupported(where, "the schema 'false' matches nothing");
      return "json-value";
    }
    if (!s.is_object()) unsupported(where, "a schema must be an object or a boolean");
    if (s.contains("nullable")) {
      // OpenAPI 3.0's keyword (the OpenAI SDK's zodResponseFormat writes it
      // for .nullable() on a primitive): the schema, or null.
      if (!s.at("nullable").is_boolean()) unsupported(where, "'nullable' must be a boolean");
      json rest = s;
      rest.erase("nullable");
      const std::string body = body_for(rest, where);
      return s.at("nullable").get<bool>() ? body + " | json-null" : body;
    }
    if (s.contains("$ref")) {
      check_keywords(s, where, {"$ref", "$defs", "definitions"});
      if (!s.at("$ref").is_string()) unsupported(where, "'$ref' must be a string");
      return ref_rule(s.at("$ref").get<std::string>(), where);
    }
    if (s.contains("const")) {
      check_keywords(s, where, {"const", "type"});
      return literal(s.at("const").dump()) + " ws";
    }
    if (s.contains("enum")) {
      check_keywords(s, where, {"enum", "type"});
      const json& e = s.at("enum");
      if (!e.is_array() || e.empty()) unsupported(where, "'enum' must be a non-empty array");
      std::string alts;
      for (const json& v : e) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      return "( " + alts + " ) ws";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      check_keywords(s, where, {"anyOf", "oneOf", "$defs", "definitions"});
      const json& list = s.at(key);
      if (!list.is_array() || list.empty()) unsupported(where, fmt::format("'{}' must be a non-empty array", key));
      std::string alts;
      for (size_t i = 0; i < list.size(); ++i)
        if (!matches_nothing(list[i]))  // zodResponseFormat's .optional().nullable() writes {"not": {}}
          alts += (alts.empty() ? "" : " | ") + rule_for(list[i], fmt::format("{}/{}/{}", where, key, i));
      if (alts.empty()) unsupported(where, fmt::format("every branch of '{}' matches nothing", key));
      return alts;
    }
    json type = s.value("type", json());
    if (type.is_null()) {
      if (s.contains("properties") || s.contains("additionalProperties")) type = "object";
      else if (s.contains("items") || s.contains("prefixItems")) type = "array";
      else {
        check_keywords(s, where, {"$defs", "definitions"});
        return "json-value";
      }
    }
    if (type.is_array()) {
      // The list's items are unique (JSON Schema's "type" keyword): so at
      // most the seven types, and the schema is copied once per type, never
      // once per item of a list of thousands (that was quadratic: found by
      // fuzz_json_schema).
      static const std::set<std::string> kTypes = {"object", "array",   "string", "integer",
                                                   "number", "boolean", "null"};
      std::set<std::string> seen;
      for (const json& t : type) {
        if (!t.is_string()) unsupported(where, "'type' must be a string or a list of strings");
        if (!kTypes.count(t.get<std::string>()))
          unsupported(where, fmt::format("type '{}' is not a JSON Schema type", t.get<std::string>()));
        if (!seen.insert(t.get<std::string>()).second)
          unsupported(where, fmt::format("'type' lists '{}' twice", t.get<std::string>()));
      }
      json rest = s;
      rest.erase("type");
      std::string alts;
      for (const json& t : type) {
        // Each branch without the keywords of the other types (they do not
        // apply to its values): {"type": ["integer", "null"], "minimum": 0}.
        json one = rest;
        one["type"] = t;
        for (const auto& [family, keys] : type_keywords())
          if (!(t.is_string() && (t.get<std::string>() == family || (family == "number" && t == "integer"))))
            for (const char* k : keys) one.erase(k);
        alts += (alts.empty() ? "" : " | ") + rule_for(one, where);
      }
      if (alts.empty()) unsupported(where, "'type' is an empty list");
      return alts;
    }
    if (!type.is_string()) unsupported(where, "'type' must be a string or a list of strings");
    const std::string t = type.get<std::string>();
    if (t == "object") return object_body(s, where);
    if (t == "array") return array_body(s, where);
    if (t == "string") return string_body(s, where);
    if (t == "integer" || t == "number") {
      check_keywords(s, where, {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "$defs",
                                "definitions"});
      const std::string range = numeric_range_gbnf(s, t == "integer", where);
      if (!range.empty()) return range + " ws";
      return t == "integer" ? "json-int" : "json-number";
    }
    if (t == "boolean") {
      check_keywords(s, where, {"type"});
      return "json-bool";
    }
    if (t == "null") {
      check_keywords(s, where, {"type"});
      return "json-null";
    }
    unsupported(where, fmt::format("type '{}' is not a JSON Schema type", t));
  }

  std::string string_body(const json& s, const std::string& where) {
    check_keywords(s, where, {"type", "minLength", "maxLength", "format", "pattern"});
    if (s.contains("pattern")) {
      if (s.contains("format")) unsupported(where, "'pattern' with 'format' is not supported");
      if (s.contains("minLength") || s.contains("maxLength"))
        unsupported(where, "'pattern' with 'minLength' / 'maxLength' is not supported");
      if (!s.at("pattern").is_string()) unsupported(where, "'pattern' must be a string");
      return "\"\\\"\" " + add(pattern_to_gbnf(s.at("pattern").get<std::string>(), where)) + " \"\\\"\" ws";
    }
    if (s.contains("format")) {
      const std::string f = s.at("format").is_string() ? s.at("format").get<std::string>() : "";
      if (s.contains("minLength") || s.contains("maxLength"))
        unsupported(where, "'minLength' / 'maxLength' with 'format' are not supported");
      if (f == "date") return "\"\\\"\" date \"\\\"\" ws";
      if (f == "time") return "\"\\\"\" time \"\\\"\" ws";
      if (f == "date-time") return "\"\\\"\" date \"T\" time \"\\\"\" ws";
      if (f == "uuid") return "\"\\\"\" uuid \"\\\"\" ws";
      unsupported(where, fmt::format("'format' '{}' is not supported (date, time, date-time, uuid are)", f));
    }
    const int64_t lo = count(s, "minLength", where, 0), hi = count(s, "maxLength", where, -1);
    if (hi >= 0 && hi < lo) unsupported(where, "'maxLength' is below 'minLength'");
    if (lo == 0 && hi < 0) return "json-string";
    return "\"\\\"\" " + repeat("json-char", lo, hi) + " \"\\\"\" ws";
  }

  std::string array_body(const json& s, const std::string& where) {
    check_keywords(s, where, {"type", "items", "prefixItems", "minItems", "maxItems", "$defs", "definitions"});
    const int64_t lo = count(s, "minItems", where, 0), hi = count(s, "maxItems", where, -1);
    if (hi >= 0 && hi < lo) unsupported(where, "'maxItems' is below 'minItems'");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s.at("prefixItems");
      if (!p.is_array()) unsupported(where, "'prefixItems' must be an array");
      for (size_t i = 0; i < p.size(); ++i) prefix.push_back(rule_for(p[i], fmt::format("{}/prefixItems/{}", where, i)));
    }
    std::string item = "json-value";
    bool more = true;
    if (s.contains("items")) {
      if (s.at("items").is_boolean() && !s.at("items").get<bool>()) more = false;
      else item = rule_for(s.at("items"), where + "/items");
    }
    if (!prefix.empty() && (lo != 0 || hi >= 0))
      unsupported(where, "'minItems' / 'maxItems' with 'prefixItems' are not supported");
    if (!prefix.empty()) {
      // The tuple in order, each element present only after the ones before
      // it (trailing ones may be missing), then any further items.
      std::string tail = more ? fmt::format("( \",\" ws {} )*", item) : "";
      std::string body = tail;
      for (size_t i = prefix.size(); i-- > 1;) body = fmt::format("( \",\" ws {} {} )?", prefix[i], body);
      return fmt::format("\"[\" ws ( {} {} )? \"]\" ws", prefix[0], body);
    }
    if (!more) return "\"[\" ws \"]\" ws";
    // lo..hi items, comma-separated.
    std::string list;
    if (hi == 0) {
      list = "";
    } else {
      const std::string rest = repeat(fmt::format("( \",\" ws {} )", item), std::max<int64_t>(lo - 1, 0),
                                      hi < 0 ? -1 : hi - 1);
      list = lo == 0 ? fmt::format("( {} {} )?", item, rest) : fmt::format("{} {}", item, rest);
    }
    return fmt::format("\"[\" ws {} \"]\" ws", list);
  }

  std::string object_body(const json& s, const std::string& where) {
    check_keywords(s, where, {"type", "properties", "required", "additionalProperties", "$defs", "definitions"});
    const json props = s.value("properties", json::object());
    if (!props.is_object()) unsupported(where, "'properties' must be an object");
    // ordered_json looks keys up linearly: a set, or a schema of 60,000
    // required properties (830 KB) took 7 s of an HTTP thread.
    std::set<std::string> names;
    for (const auto& [key, sub] : props.items()) names.insert(key);
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s.at("required").is_array()) unsupported(where, "'required' must be an array");
      for (const json& r : s.at("required")) {
        if (!r.is_string() || !names.count(r.get<std::string>()))
          unsupported(where, fmt::format("'required' names '{}', which is not in 'properties'", r.dump()));
        required.insert(r.get<std::string>());
      }
    }
    const json* extra = s.contains("additionalProperties") ? &s.at("additionalProperties") : nullptr;
    const bool extra_allowed = extra && !(extra->is_boolean() && !extra->get<bool>());
    if (!props.empty() && extra_allowed)
      unsupported(where, "'additionalProperties' other than false beside 'properties' is not supported");
    if (props.empty()) {
      if (!extra_allowed && extra) return "\"{\" ws \"}\" ws";
      const std::string v = extra && !extra->is_boolean() ? rule_for(*extra, where + "/additionalProperties")
                                                          : "json-value";
      const std::string kv = add(fmt::format("json-string \":\" ws {}", v));
      return fmt::format("\"{{\" ws ( {} ( \",\" ws {} )* )? \"}}\" ws", kv, kv);
    }
    // kv_i for each property, in the schema's order; A_i: the members from i
    // on with no leading comma, B_i: the same, each after a comma.
    std::vector<std::string> kv;
    std::vector<bool> req;
    for (const auto& [key, sub] : props.items()) {
      const std::string v = rule_for(sub, where + "/properties/" + key);
      kv.push_back(add(fmt::format("{} ws \":\" ws {}", literal(json(key).dump()), v)));
      req.push_back(required.count(key) > 0);
    }
    const size_t n = kv.size();
    std::vector<std::string> a(n + 1), b(n + 1);
    a[n] = b[n] = "";
    for (size_t i = n; i-- > 0;) {
      const std::string with_comma = fmt::format("\",\" ws {}", kv[i]);
      b[i] = add(req[i] ? fmt::format("{} {}", with_comma, b[i + 1]) : fmt::format("( {} )? {}", with_comma, b[i + 1]));
      if (req[i]) a[i] = add(fmt::format("{} {}", kv[i], b[i + 1]));
      else a[i] = add(a[i + 1].empty() ? fmt::format("( {} {} )?", kv[i], b[i + 1])
                                       : fmt::format("{} {} | {}", kv[i], b[i + 1], a[i + 1]));
    }
    return fmt::format("\"{{\" ws {} \"}}\" ws", a[0]);
  }

  const json& root_;
  std::string prefix_;
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int n_ = 0;
  int depth_ = 0;  // body_for calls open
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return Compiler(schema).run(); }

SchemaRules json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix) {
  return Compiler(schema, prefix).rules();
}

const std::string& json_schema_base_gbnf(bool compact) {
  static const std::string free = std::string(kWsFree) + kBaseRules;
  static const std::string none = std::string(kWsCompact) + kBaseRules;
  return compact ? none : free;
}

const std::string& json_object_gbnf() {
  static const std::string text = json_schema_to_gbnf(nlohmann::ordered_json{{"type", "object"}});
  return text;
}

Grammar compile_json_schema(const nlohmann::ordered_json& schema) {
  Compiler compiler(schema);
  const std::string text = compiler.run();
  try {
    return parse_gbnf(text);
  } catch (const LeftRecursion& e) {
    // A rule made for a $ref that reaches itself before any character is
    // written ({"$defs": {"a": {"$ref": "#/$defs/a"}}}): said in the
    // schema's terms, not the generated rule's name.
    const std::string ref = compiler.ref_of_rule(e.rule);
    if (ref.empty()) throw Error(std::string("the schema's ") + e.what());
    throw Error(ref + ": '$ref' reaches itself before any value is written (left recursion), so no document can be "
                      "generated");
  } catch (const Error& e) {
    throw Error(std::string("the schema's ") + e.what());  // "the schema's grammar: ..."
  }
}

}  // namespace nexus::grammar
