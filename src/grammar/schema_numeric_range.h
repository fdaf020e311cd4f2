// JSON Schema numeric bounds -> GBNF: the grammar of exactly the JSON number
// texts whose value lies within `minimum` / `maximum` / `exclusiveMinimum` /
// `exclusiveMaximum` (json_schema.cpp calls this for "integer" and "number").
//
// Input: the schema object (only those four keywords are read), whether the
// type is "integer", and `where` (the schema's JSON pointer, for messages).
// Output: a GBNF expression (no rule definitions, no trailing whitespace)
// over the number's characters, or "" when the schema has none of the four
// keywords (the caller keeps its unbounded rule).
//
// Integers: every integer in the range, written without leading zeros and
// never as "-0", and nothing else. Bounds combine as in JSON Schema 2020-12
// (each present keyword applies; a fractional bound is rounded inward:
// minimum 2.5 means >= 3). The digits follow llama.cpp's
// json-schema-to-grammar construction for integer ranges
// (_generate_min_max_int): the range is split by digit count; within one
// count, two equal-length decimal strings lo..hi become "common prefix, then
// lo's digit followed by lo's tail..99, the digits strictly between followed
// by any digits, hi's digit followed by 00..hi's tail", recursively. An open
// side allows any number of digits (the range has no end there).
//
// Numbers: bounds must be whole numbers (minimum 0, exclusiveMaximum 100):
// then a value I.F (integer part I, fraction F) is in range by comparing I
// with the bound and F with zero, which a grammar can state exactly (e.g.
// x <= 5: I in 0..4 with any fraction, or I = 5 with an all-zero or no
// fraction). The bounded number grammar has no exponent (every value in the
// range can be written without one). A fractional bound on "number"
// (minimum 0.5) is refused: matching it exactly needs a digit-by-digit
// comparison of the fraction too, not implemented.
//
// Errors (nexus::Error, "WHERE: ..."): a bound that is not a number (also
// draft-04's boolean exclusiveMinimum / exclusiveMaximum), a bound beyond
// +-(2^64 - 1), a fractional bound on "number", and bounds that leave no value
// (minimum above maximum, or equal with an exclusive side).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace nexus::grammar {

std::string numeric_range_gbnf(const nlohmann::ordered_json& schema, bool integer, const std::string& where);

}  // namespace nexus::grammar
