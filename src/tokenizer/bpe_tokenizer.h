// BpeTokenizer: the "gpt2" tokenizer model, byte-level BPE with merge ranks.
//
// Source: GPT-2's encoder.py (bytes_to_unicode, bpe) and llama.cpp's
// llm_tokenizer_bpe (llama-vocab.cpp). Per run of plain text:
//   1. the PreTokenizer of tokenizer.ggml.pre splits it into words;
//   2. each word's bytes are mapped to printable characters with GPT-2's
//      byte-to-unicode table (so every byte, valid UTF-8 or not, has a form);
//   3. llama3-style vocabularies emit a word that is itself a token directly
//      (ignore_merges); otherwise, starting from single characters, the
//      adjacent pair with the lowest rank in tokenizer.ggml.merges is merged
//      until none is left (ties: leftmost first; priority queue);
//   4. each final symbol that is not a token is emitted character by
//      character (each is a byte-level token in any complete vocabulary; a
//      byte the vocabulary has no token for is dropped, as in llama.cpp).
// Pieces map the byte-level characters back to bytes.
//
// SentencePiece-shaped BPE (tokenizer.ggml.model "gemma4", or a pre family
// with byte_encode false, see pre_families.h): spaces become U+2581 before
// step 1, step 2 is skipped (words are raw UTF-8), a word made only of
// newlines that is a token is emitted whole, and in step 4 the bytes of a
// symbol that is not a token become <0xXX> tokens. Pieces (user-defined
// tokens' too) turn U+2581 back into spaces and <0xXX> into the byte.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab_tokenizer.h"

namespace nexus::tok {

class BpeTokenizer final : public VocabTokenizer {
 public:
  // Throws nexus::Error on missing or inconsistent metadata, malformed
  // merges, or an unknown tokenizer.ggml.pre.
  // `pre_override` replaces tokenizer.ggml.pre (llama.cpp forces "gemma4"
  // for the gemma4 tokenizer model).
  explicit BpeTokenizer(const GgufFile& gguf, std::string_view pre_override = {});

  const PreTokenizer& pretokenizer() const { return *pre_; }

 private:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override;
  std::string plain_piece(int32_t id) const override;
  std::string user_defined_piece(int32_t id) const override;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t rank(std::string_view left, std::string_view right, std::string& key) const;

  std::unique_ptr<PreTokenizer> pre_;
  std::unordered_map<std::string, int32_t> ranks_;  // "left right" -> merge rank
  std::array<int32_t, 256> byte_tokens_{};  // raw mode: byte -> <0xXX> token, -1
};

// GPT-2's byte-to-unicode table: the UTF-8 text standing for byte `b`.
const std::string& byte_to_unicode(uint8_t b);
// Inverse: the byte a code point stands for, or -1.
int unicode_to_byte(uint32_t cp);

}  // namespace nexus::tok
