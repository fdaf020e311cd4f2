// PreTokenizer: splits text into words before byte-level BPE ("gpt2" model).
//
// Source: llama.cpp's llama-vocab.cpp (llm_tokenizer_bpe) and unicode.cpp
// (unicode_regex_split). Each `tokenizer.ggml.pre` family (the table in
// pre_families.h) has a list of regexes applied in sequence: the first
// splits the whole text; each later one splits every piece the previous
// produced. A match becomes a piece, and so does any text between two
// matches (nothing is dropped), so the pieces always cover the input
// exactly; an empty match splits the piece at its position.
//
// Matching uses PCRE2 in UTF + UCP mode (\p{L}, \p{N}, \p{P}, \s are the
// Unicode classes). PCRE2_MATCH_INVALID_UTF lets invalid UTF-8 through: such
// bytes never match and end up in the in-between pieces, so encode() still
// sees every byte. Known deviation from llama.cpp: its hand-written gpt2 and
// llama3 splitters emit an unassigned code point (no Unicode category) as a
// piece of its own, while the regex groups it with neighbouring symbols.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nexus::tok {

class PreTokenizer {
 public:
  // `pre` is the tokenizer.ggml.pre value; "" means absent (llama.cpp then
  // uses its "default" regexes). Throws nexus::Error for a name this build
  // does not know, listing the known ones, and for a name llama.cpp knows
  // that Nexus does not implement ("whitespace"), naming it and why.
  explicit PreTokenizer(std::string_view pre);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Consecutive non-empty pieces of `text` (views into it) covering it exactly.
  // Thread-safe.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::string& family() const { return family_; }
  // llama3-style vocabularies: a word that is already a token skips BPE.
  bool ignore_merges() const { return ignore_merges_; }
  // Whether the family adds BOS when tokenizer.ggml.add_bos_token is absent.
  bool add_bos_default() const { return add_bos_default_; }
  // false for SentencePiece-shaped BPE (gemma4): raw UTF-8 words, spaces
  // escaped to U+2581, <0xXX> byte fallback (see pre_families.h).
  bool byte_encode() const { return byte_encode_; }

  // All accepted `pre` names, comma-separated (for messages and docs).
  static std::string known_names();

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  std::string family_;
  bool ignore_merges_ = false;
  bool add_bos_default_ = false;
  bool byte_encode_ = true;
};

}  // namespace nexus::tok
