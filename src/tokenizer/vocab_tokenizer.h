// VocabTokenizer: what the "llama" (SPM) and "gpt2" (BPE) tokenizers share,
// i.e. everything but the algorithm that turns a run of plain text into ids.
// Internal to src/tokenizer; users see nexus::Tokenizer only.
//
// Source: llama.cpp's llama-vocab.cpp (llama_vocab::impl::load, tokenize,
// tokenizer_st_partition, token_to_piece), whose behaviour this follows:
//  * Special-token splitting: before the model runs, the text is cut at
//    literal occurrences of special tokens, longest token text first.
//    User-defined tokens (type 4) are always cut out; control (3) and
//    unknown (2) tokens only when parse_special is set.
//  * Pieces: control/unknown tokens render "" unless render_special;
//    user-defined tokens render their text; unused (5) and undefined (0)
//    tokens render "".
//  * End of generation: EOS, EOT, EOM, and tokens whose text is one of
//    <|eot_id|> <|im_end|> <|end|> <end_of_turn> <|endoftext|> <|eom_id|>
//    <EOT> (those are also treated as control tokens, as in llama.cpp).
//  * Metadata ids equal to -1 / 0xFFFFFFFF mean "none" (stories260K stores
//    its padding id that way); any other id outside [0, n_vocab) is an error.
// All methods are const after construction and safe to call from several
// threads at once (no caches; PCRE2 match data is per call).
// Deliberate differences: no clean_up_tokenization_spaces on decode (so
// decode(encode(s)) == s), and invalid UTF-8 is encoded byte-wise instead of
// being rejected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace nexus::tok {

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kTypeUndefined = 0,
  kTypeNormal = 1,
  kTypeUnknown = 2,
  kTypeControl = 3,
  kTypeUserDefined = 4,
  kTypeUnused = 5,
  kTypeByte = 6,
};

enum class VocabModel { kSpm, kBpe };

// "<0xAB>" -> 0xAB (SentencePiece byte-fallback token text); -1 otherwise.
int parse_byte_token(std::string_view text);

class VocabTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const final;
  std::vector<int32_t> encode_as_output(std::string_view text) const final;
  std::string token_to_piece(int32_t id, bool render_special = false) const final;

  int32_t lookup(std::string_view text) const;  // exact vocab text -> id, -1 if absent
  int32_t unk_id() const { return unk_id_; }

 protected:
  // Reads and validates the metadata shared by both models. `add_bos_default`
  // applies when tokenizer.ggml.add_bos_token is absent.
  void load_common(const GgufFile& gguf, VocabModel model, bool add_bos_default);
  // Fills the piece cache; call at the end of the derived constructor.
  void build_pieces();

  // encode()'s loop: the runs of `text` between special tokens, the first
  // with after_special as given.
  void encode_runs(std::string_view text, bool parse_special, bool after_special, std::vector<int32_t>& out) const;
  // Encodes one run of plain text (no special tokens in it). after_special:
  // the run starts the text or follows a special token.
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<int32_t>& out) const = 0;
  // The bytes of a normal or byte token (model-specific decoding).
  virtual std::string plain_piece(int32_t id) const = 0;
  // The text a user-defined token stands for: its vocabulary text, except
  // where the model escapes spaces in every token (SentencePiece-shaped BPE).
  virtual std::string user_defined_piece(int32_t id) const { return tokens_[id]; }

  std::unordered_map<std::string_view, int32_t> token_to_id_;  // views into tokens_
  int32_t unk_id_ = -1;
  int32_t eot_id_ = -1;
  int32_t eom_id_ = -1;

 private:
  struct Fragment {
    int32_t token;  // -1: plain text
    size_t off, len;
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void read_special_ids(const GgufFile& gguf, VocabModel model);
  void collect_eog();

  std::vector<int32_t> special_ids_;  // control/user-defined/unknown, longest text first
  std::vector<uint8_t> rstrip_;           // per token: eat the whitespace after it when split out
  std::vector<std::string> pieces_;       // render_special = true pieces
};

}  // namespace nexus::tok
