// JSON Schema -> grammar, for response_format {"type": "json_schema"}: the
// output is a JSON document valid against the schema (the subset below).
//
// Supported (JSON Schema 2020-12 keywords, as OpenAI's structured outputs
// use them): type (a name or a list; each type of a list gets only the
// keywords that apply to it, so {"type": ["integer", "null"], "minimum": 0}
// works), properties + required (properties in the order the schema lists
// them; optional ones may be left out), additionalProperties (false, or for
// an object without `properties` a schema / true: a map), enum, const,
// anyOf, oneOf (as anyOf: a context-free grammar cannot check exclusivity),
// $ref to "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), items,
// prefixItems, minItems, maxItems, minLength, maxLength, format date / time
// / date-time / uuid, and the annotations title, description, default,
// examples, $comment, $schema, $id, deprecated, readOnly, writeOnly (no
// effect on the output). Also:
//  - minimum / maximum / exclusiveMinimum / exclusiveMaximum on "integer":
//    exactly the integers in the range (any combination, negative ranges,
//    bounds up to +-(2^64 - 1); no leading zeros, no "-0"); on "number":
//    exact for whole-number bounds (values written without an exponent);
//    a fractional bound on "number" (minimum 0.5) is refused, since comparing
//    the fraction digit by digit is not implemented (schema_numeric_range.h).
//  - pattern on strings: an ECMA-262 regex subset, unanchored as JSON Schema
//    says (the string must contain a match; "^...$" anchors
//    it; llama.cpp instead treats every pattern as anchored), characters
//    escaped as JSON requires; lookarounds, backreferences, lazy
//    quantifiers, \b, \p{...}, inner anchors, deep nesting, large
//    repetition counts and repeated parts that can match the empty string
//    are refused (schema_pattern.h lists all). `pattern`
//    with minLength / maxLength or with format is refused (not exact).
//  - nullable: true (OpenAPI 3.0's keyword, which the OpenAI SDK's
//    zodResponseFormat writes for .nullable() on a primitive): the schema or
//    null. A branch of anyOf / oneOf that matches nothing (false, {"not":
//    {}}: its .optional().nullable()) is left out; `not` anywhere else is
//    refused.
// The schema is an ordered_json so that properties keep the schema's order.
// An object with `properties` and no additionalProperties gets no other
// keys (what OpenAI's strict mode requires, and what a caller who lists
// properties wants).
//
// Anything else (multipleOf, allOf, not, if/then/else, additionalProperties
// beside properties, other formats, remote $refs, ...) throws nexus::Error
// naming the keyword and where it is ("#/properties/age: 'multipleOf' is not
// supported here"), so a request never silently gets less than it asked
// for. Bad values of supported keywords (a non-numeric bound, minimum above
// maximum, an invalid pattern) throw the same way. So does a schema nested
// deeper than 128 levels (as a JSON document, or as subschemas counting each
// $ref followed): the compiler recurses per level.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace nexus::grammar {

// The GBNF text for `schema` (kept for messages and tests).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

Grammar compile_json_schema(const nlohmann::ordered_json& schema);

// The GBNF of response_format {"type": "json_object"} (OpenAI's JSON mode:
// any JSON object at the top): the schema {"type": "object"} compiled, so
// its whitespace, strings and numbers are bounded as every schema's are.
const std::string& json_object_gbnf();

// For grammars that embed schemas (tool calls, src/server/tool_calls):
// the schema's rules, every name starting with `prefix` (GBNF name
// characters), without `root` and without the shared base rules, which the
// embedding grammar appends once (json_schema_base_gbnf(): ws, json-value,
// json-string, ... date, time, uuid). `top` matches one value (trailing
// whitespace included). Errors as compile_json_schema's compiler.
struct SchemaRules {
  std::string top;
  std::string rules;
};
SchemaRules json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix);
// The base rules; `compact`: no whitespace between tokens (`ws` matches
// nothing), for output written compactly such as forced tool arguments.
const std::string& json_schema_base_gbnf(bool compact = false);

}  // namespace nexus::grammar
