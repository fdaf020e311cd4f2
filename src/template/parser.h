// Parser: tokens -> syntax tree, with the grammar and operator precedence of
// @huggingface/jinja's parser (lowest first): `a if c else b`, or, and,
// not, comparisons (== != < > <= >= in, not in), + - ~, * / // %, **,
// `is [not] test`, `| filter`, unary - +, calls/members/subscripts/slices.
// Statements: if/elif/else, for (with `if` filter, else, break, continue),
// set (also `{% set x %}...{% endset %}` and `set ns.attr`), macro (defaults,
// varargs/kwargs), call blocks (`{% call(args) m() %}` with caller()),
// filter blocks. Throws TemplateError(Syntax) naming the line and what was
// expected; nesting deeper than kMaxParseDepth is refused (never a stack
// overflow).
#pragma once

#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace nexus::tmpl {

inline constexpr int kMaxParseDepth = 128;

NodeList parse(const std::vector<Token>& tokens);

}  // namespace nexus::tmpl
