// SpmTokenizer: the "llama" tokenizer model, SentencePiece-style BPE over
// token scores.
//
// Source: llama.cpp's llm_tokenizer_spm (llama-vocab.cpp), itself following
// SentencePiece's bpe_model.cc. Per run of plain text:
//   1. spaces become U+2581 ("▁"), and one "▁" is prepended when
//      add_space_prefix is set and the run starts the text or follows a
//      special token;
//   2. the text is split into UTF-8 characters (an invalid byte is a symbol
//      of its own);
//   3. repeatedly, the adjacent pair whose concatenation is a vocabulary
//      token with the highest score is merged (ties: leftmost first), using
//      a priority queue of candidate pairs;
//   4. each final symbol that is not a token is emitted byte by byte as
//      <0xXX> tokens (else the single-byte token, else unk).
#pragma once

#include <array>
#include <vector>

#include "tokenizer/vocab_tokenizer.h"

namespace nexus::tok {

class SpmTokenizer final : public VocabTokenizer {
 public:
  // Throws nexus::Error on missing or inconsistent metadata.
  explicit SpmTokenizer(const GgufFile& gguf);

 private:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override;
  std::string plain_piece(int32_t id) const override;
  // Appends the token for byte `b`, else unk, else nothing (no such token).
  void push_byte(uint8_t b, std::vector<int32_t>& out) const;

  std::vector<float> scores_;  // tokenizer.ggml.scores (all 0 when absent)
  std::array<int32_t, 256> byte_tokens_{};  // byte -> <0xXX> token (or the byte's own), -1
};

}  // namespace nexus::tok
