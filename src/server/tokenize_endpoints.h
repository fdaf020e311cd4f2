// POST /tokenize and POST /detokenize, as llama.cpp's server has them.
//
//   /tokenize    {"content": string (required), "add_special": bool (false:
//                no BOS; true: BOS per the tokenizer's default),
//                "parse_special": bool (true: control tokens written in the
//                text are recognised), "with_pieces": bool (false)}
//             -> {"tokens": [id...]}, or with_pieces {"tokens": [{"id": id,
//                "piece": text}]}, a piece that is not valid UTF-8 (part of
//                a character) as its bytes, [int...], as llama.cpp does.
//   /detokenize  {"tokens": [id...] (required, each in [0, n_vocab))}
//             -> {"content": text}: Tokenizer::decode, so the space that
//                add_space_prefix puts before the first word is removed
//                (detokenize(tokenize(s)) == s; llama.cpp keeps it) and
//                control tokens give "". Invalid UTF-8 from a partial
//                character becomes U+FFFD.
// Bad input: 400 invalid_request_error naming the field. Pure: no I/O.
#pragma once

#include <string_view>

#include "server/api_router.h"
#include "server/backend.h"

namespace nexus::server {

HttpReply tokenize_reply(const Backend& backend, std::string_view body);
HttpReply detokenize_reply(const Backend& backend, std::string_view body);

}  // namespace nexus::server
