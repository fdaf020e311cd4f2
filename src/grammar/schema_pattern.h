// JSON Schema `pattern` -> GBNF: a regular expression (the subset below of
// ECMA-262 syntax, which JSON Schema 2020-12 specifies for `pattern`)
// compiled to a GBNF expression over the characters of a JSON string's
// content, i.e. the text between the quotes (json_schema.cpp wraps it in
// "\"" ... "\"").
//
// Input: the pattern (UTF-8), and `where` (the schema's JSON pointer, for
// messages). Output: a GBNF expression that may refer to the base rule
// `json-char` (json_schema_base_gbnf()); the JSON texts it matches are
// exactly those of the strings that match the pattern, with each pattern
// character written as JSON requires: '"' as \", '\' as \\, control
// characters as \b \t \n \f \r or \u00XX (either hex case); every other
// character unescaped (a pattern character is not matched in its optional
// \uXXXX or \/ spelling). Lone surrogates are never produced.
//
// Anchoring: a JSON Schema pattern is unanchored (the string must contain a
// match, ECMA-262 RegExp.test semantics). That is what the grammar states:
// a top-level alternative that does not start with '^' may be preceded by
// any JSON string characters, one that does not end with '$' may be followed
// by any (so "\\d{3}" accepts "ab123cd"). llama.cpp's converter instead
// treats every pattern as if anchored at both ends; here "^...$" gives that.
//
// Supported: literal characters; escapes \n \r \t \v \f \0 \xHH \uHHHH
// (surrogate pairs combined) \u{H...} \cX and identity escapes of
// punctuation (\. \* \/ \- ...); '.' (any character but \n \r U+2028
// U+2029); classes [abc] [a-z] [^...] (also [] and [^]) with \d \w \s
// \D \W \S and \b (backspace) inside; \d \w \s \D \W \S; groups ( ),
// (?: ) and (?<name> ); alternation |; quantifiers * + ? {n} {n,} {n,m}
// (a '{' that does not start a quantifier is a literal, as ECMA-262 Annex B
// reads it); '^' at the start and '$' at the end of a top-level alternative.
//
// Refused (nexus::Error "WHERE: 'pattern' "P": CONSTRUCT ... is not
// supported", or "... is not a valid regular expression: ..."):
// lookarounds (?= (?! (?<= (?<!, backreferences \1-\9 and \k<name>, word
// boundaries \b \B, Unicode property escapes \p \P, lazy quantifiers (*? +?
// ?? {n,m}?: they match the same strings, but are refused rather than read
// as greedy), anchors anywhere else, groups nested deeper than
// kPatternMaxDepth, a repetition bound above kPatternMaxRepeat, a pattern
// whose expansion (each quantified part counted as often as its bound
// repeats it) exceeds kPatternMaxWeight characters, a repetition other than
// '?' of a part that can match the empty string ((a*)*, (a?){50}: the
// matcher would follow many equivalent parses, its cost growing with the
// square of the count), a class that matches no character, and syntax
// errors. The two size limits keep the matcher's parse stacks (about one
// per position of the expanded pattern) under its kMaxStacks. The source followed for the syntax: ECMA-262
// section 22.2 (RegExp pattern grammar, Annex B.1.2 for '{' literals).
#pragma once

#include <cstddef>
#include <string>

namespace nexus::grammar {

constexpr int kPatternMaxDepth = 32;
constexpr int kPatternMaxRepeat = 1000;
constexpr long kPatternMaxWeight = 2000;

std::string pattern_to_gbnf(const std::string& pattern, const std::string& where);

}  // namespace nexus::grammar
