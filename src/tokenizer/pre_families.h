// The table of pre-tokenizer families: which `tokenizer.ggml.pre` values
// name which list of split regexes, and the per-family flags llama.cpp sets.
//
// Source: llama.cpp's src/llama-vocab.cpp (ggml-org/llama.cpp, read at commit
// 00ad355e): llama_vocab::impl::load maps each `tokenizer.ggml.pre` string to a
// LLAMA_VOCAB_PRE_TYPE_* (setting ignore_merges / add_bos / escape_whitespaces
// for some), and llm_tokenizer_bpe's constructor gives each type its
// regex_exprs and byte_encode. One Family here is one `case` group of that
// switch; `family` is the type's name in lower case.
//
// Regexes are PCRE2 (UTF + UCP). Where llama.cpp rewrote a tokenizer.json
// regex only because std::regex lacks a feature (\p{Lu}/\p{Ll} classes, (?i:),
// \p{Han}), the original tokenizer.json regex is used instead, so the split is
// the one Hugging Face tokenizers make: gpt-4o, tekken, granite-embed-multi,
// tiny_aya and kimi-k2 (llama.cpp approximates "upper/lower-case letter" with
// [^a-z]/[^A-Z] lookaheads, which differs on non-ASCII letters and marks).
// Non-ASCII character classes are written as \x{...} code point ranges taken
// from the same regexes.
#pragma once

#include <span>
#include <string_view>

namespace nexus::tok {

struct PreFamily {
  const char* family;                 // llama.cpp's pre type, e.g. "llama3"
  std::span<const char* const> names;  // accepted tokenizer.ggml.pre values
  std::span<const char* const> regexes;  // applied in order (see pretokenizer.h)
  bool ignore_merges = false;  // a word that is already a token skips BPE
  bool add_bos = false;        // BOS added when tokenizer.ggml.add_bos_token is absent
  // false: words stay raw UTF-8 (no GPT-2 byte-to-unicode mapping), unknown
  // bytes become <0xXX> tokens, and spaces are escaped to U+2581 first
  // (Gemma 4 style SentencePiece-shaped BPE).
  bool byte_encode = true;
  // Non-empty: llama.cpp knows the name but Nexus refuses it, for this reason.
  const char* refused = nullptr;
};

// Every family, in llama.cpp's order.
std::span<const PreFamily> pre_families();

// The family accepting `name` (a tokenizer.ggml.pre value), or nullptr.
const PreFamily* find_pre_family(std::string_view name);

}  // namespace nexus::tok
