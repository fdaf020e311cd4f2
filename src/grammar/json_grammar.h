// The grammar of a JSON value (RFC 8259) in GBNF, for response_format
// {"type": "json_object"}: an object at the top, as OpenAI's JSON mode
// promises. Whitespace between tokens is one space, or a newline and an
// indent of at most 20 (llama.cpp's choice), so a model cannot pad forever; strings
// exclude raw control characters as the RFC requires; numbers follow the
// RFC's grammar (no leading zeros, no bare '.'), within a double's range
// (at most 16 integer digits and a positive exponent of at most 2 digits:
// below 1e115, so no parser reads infinity; nlohmann refuses 8e721) and
// with at most 16 fraction digits (a double holds 17 significant digits;
// stories260K otherwise writes -3.1000... until max_tokens, as llama.cpp's
// models did before its grammars bounded the fraction the same way).
#pragma once

namespace nexus::grammar {

inline constexpr const char* kJsonObjectGbnf = R"gbnf(
root    ::= object
value   ::= object | array | string | number | "true" ws | "false" ws | "null" ws
object  ::= "{" ws ( member ( "," ws member )* )? "}" ws
member  ::= string ":" ws value
array   ::= "[" ws ( value ( "," ws value )* )? "]" ws
string  ::= "\"" char* "\"" ws
char    ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number  ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] ( "-" [0-9]{1,3} | "+"? [0-9]{1,2} ) )? ws
ws      ::= ( " " | "\n" [ \t]{0,20} )?
)gbnf";

}  // namespace nexus::grammar
