// GBNF, llama.cpp's grammar format (its grammars/README.md), parsed into a
// byte Grammar (grammar.h).
//
//   rule-name ::= alternatives          one rule per definition; `root` is the start
//   a b c                               sequence;  a | b   alternatives;  ( ... )  group
//   "text"                              literal, escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH
//   [a-z0-9_]  [^"\\]                   character class over code points (negated with ^)
//   .                                   any character
//   x*  x+  x?  x{m}  x{m,}  x{m,n}     repetition
//   # comment                           to the end of the line
// A newline ends a definition unless it is inside parentheses or the next
// line goes on with `|`. Rule names are [A-Za-z0-9_-]+.
//
// Errors (nexus::Error, with the line and column): syntax errors, an
// undefined rule (named), no `root`, left recursion, repetition bounds above
// kMaxRepeat, grammars larger than kMaxElements elements once expanded, and
// nesting past util/json_depth.h's limit (groups inside groups, or chains of
// leading rule references: grammar.h check()).
#pragma once

#include <cstddef>
#include <string_view>

#include "grammar/grammar.h"

namespace nexus::grammar {

constexpr int kMaxRepeat = 1000;
constexpr size_t kMaxElements = 200000;

Grammar parse_gbnf(std::string_view text);

}  // namespace nexus::grammar
