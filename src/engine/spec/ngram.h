// Prompt lookup decoding (Saxena 2023, "Prompt Lookup Decoding"; llama.cpp's
// lookup decoding): the proposal for a sequence's next tokens is what
// followed the most recent earlier occurrence of its last tokens in its own
// text (prompt + generated). It costs no model and wins where the output
// copies its input (summaries, code edits, quoting, repetition).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nexus::spec {

// Appends to `out` (cleared first) at most k tokens: for the largest m in
// [1, max_n] such that the last m tokens of `tokens` also occur earlier in
// `tokens`, the tokens that follow the most recent such occurrence (never
// past the end of `tokens`). Returns out.size(); 0 when nothing matches or
// k < 1 or max_n < 1. O(tokens.size() * max_n).
int32_t ngram_propose(std::span<const int32_t> tokens, int32_t max_n, int32_t k, std::vector<int32_t>& out);

}  // namespace nexus::spec
