// Tokenizer: text <-> token ids, built from a GGUF file's tokenizer.* metadata.
//
// Source: GGUF spec, "Tokenizer" keys (tokenizer.ggml.model, .tokens, .scores,
// .token_type, .merges, .bos_token_id, .eos_token_id, .eot_token_id,
// .add_bos_token, .add_space_prefix, .pre) and llama.cpp's llama-vocab.cpp for
// behaviour. Two models:
//   "llama": SentencePiece-style BPE over scores, "▁" for spaces, the leading
//            space rule (add_space_prefix, default true), <0xXX> byte fallback.
//   "gpt2":  byte-level BPE with merges, pre-tokenized by the regex of the
//            family named in tokenizer.ggml.pre (PCRE2, Unicode classes).
// Token ids are int32 in [0, n_vocab).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nexus {

class GgufFile;

class Tokenizer {
 public:
  // Reads the vocabulary from `gguf`. Throws nexus::Error when the metadata is
  // missing, inconsistent (ids out of range, arrays of different lengths) or
  // names a tokenizer model / pre-tokenizer this build does not know.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);
  virtual ~Tokenizer() = default;

  // Encodes UTF-8 `text`. add_bos: prepend BOS when the vocabulary asks for it
  // (tokenizer.ggml.add_bos_token; default true for "llama" and for "gpt2"
  // with a Llama 3 pre-tokenizer, false for other "gpt2"). parse_special:
  // recognise control tokens written literally in the text (e.g.
  // "<|im_start|>"); false treats them as text. User-defined tokens (type 4)
  // are split out either way, as llama.cpp and HF tokenizers do.
  // Invalid UTF-8 is encoded byte-wise (byte fallback), never an error.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos,
                                      bool parse_special = false) const = 0;
  // Text as the model's own output spells it after earlier text: no BOS, no
  // special tokens parsed, and for "llama" no add_space_prefix space (a
  // leading space is the text's own), so that the concatenated pieces
  // (token_to_piece) of an output encode back to ids that match it from
  // the first token on. encode() would spell ", there" as "▁," "▁there"
  // where the model writes "," "▁there". For Predicted Outputs.
  virtual std::vector<int32_t> encode_as_output(std::string_view text) const = 0;

  // The bytes a token stands for when it follows other text: "▁" becomes a
  // space, <0xXX> its byte, byte-level symbols their bytes. Control tokens
  // (BOS, EOS, ...) give "" unless render_special. May be part of a UTF-8
  // character: streaming output must go through StreamDecoder.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;

  // Decodes a whole sequence. For "llama", the space that add_space_prefix put
  // before the first word is removed when strip_leading_space is set (as
  // decode(encode(s)) == s requires).
  std::string decode(std::span<const int32_t> ids, bool strip_leading_space = true) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token_text(int32_t id) const { return tokens_.at(id); }  // raw vocab entry
  int32_t bos_id() const { return bos_id_; }   // -1 when the vocabulary has none
  int32_t eos_id() const { return eos_id_; }
  bool add_bos_default() const { return add_bos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // End-of-generation tokens: EOS, EOT, EOM and similar named in the metadata.
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  // Finds a token by its exact vocab text (e.g. "<|im_end|>"); -1 if absent.
  int32_t find_token(std::string_view text) const;

 protected:
  std::vector<std::string> tokens_;
  std::vector<int32_t> token_types_;  // GGUF token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_space_prefix_ = false;
  std::vector<int32_t> eog_ids_;
};

// StreamDecoder: turns a stream of token ids into text chunks that never end
// in the middle of a UTF-8 character. Bytes of an incomplete character are
// held back until the rest arrives; flush() releases whatever is left
// (invalid sequences are replaced by U+FFFD so output is always valid UTF-8).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  // Returns the complete characters that `id` finished (possibly "").
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace nexus
