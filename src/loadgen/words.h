// Random prompt text for synthetic load: words drawn uniformly from a
// built-in list of common, short English words (so most are one or two
// tokens under any BPE/SentencePiece vocabulary; a word count is only an
// approximation of a token count, and the report shows the server's own
// prompt_tokens).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace nexus::loadgen {

// `n_words` space-separated words (n_words >= 1).
std::string random_words(int32_t n_words, std::mt19937_64& rng);

// How many words the built-in list holds (for tests).
size_t word_list_size();

}  // namespace nexus::loadgen
