// Lexer: Jinja source -> tokens, as @huggingface/jinja's lexer (which
// transformers.js and the Hugging Face hub render chat templates with):
//   - a single trailing newline of the source is dropped;
//   - lstrip_blocks and trim_blocks are on (transformers' chat-template
//     environment): spaces/tabs before `{%`/`{#` at a line start are removed,
//     and the first newline after `%}`/`#}` too;
//   - `{%-`, `-%}`, `{{-`, `-}}`, `{#-`, `-#}` strip the whitespace on that side;
//   - transformers' `{% generation %}` / `{% endgeneration %}` tags are removed.
// Throws TemplateError(Syntax) naming the line of an unterminated string,
// comment or tag, a bad escape, or a character outside the language.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nexus::tmpl {

enum class Tok {
  Text, Number, String, Ident, Equals, OpenParen, CloseParen, OpenStatement, CloseStatement,
  OpenExpression, CloseExpression, OpenBracket, CloseBracket, OpenBrace, CloseBrace, Comma, Dot,
  Colon, Pipe, Additive, Multiplicative, Power, Comparison, Unary, Comment,
};

struct Token {
  Tok type;
  std::string value;
  int line;  // 1-based, in the preprocessed source
};

const char* token_name(Tok t);

std::vector<Token> tokenize(std::string_view source);

}  // namespace nexus::tmpl
