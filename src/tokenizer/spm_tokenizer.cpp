#include "tokenizer/spm_tokenizer.h"

#include <optional>

#include "gguf/gguf_file.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nexus::tok {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

}  // namespace

SpmTokenizer::SpmTokenizer(const GgufFile& gguf) {
  load_common(gguf, VocabModel::kSpm, /*add_bos_default=*/true);
  const size_t n = tokens_.size();
  scores_.assign(n, 0.0f);
  if (const GgufArray* s = gguf.get_array("tokenizer.ggml.scores")) {
    if (s->floats.size() != n || s->size() != n) {
      throw Error("tokenizer: tokenizer.ggml.scores must be " + std::to_string(n) +
                  " floats (one per token), got " + std::to_string(s->size()) + " of type " +
                  std::string(gguf_value_type_name(s->elem_type)));
    }
    for (size_t i = 0; i < n; ++i) scores_[i] = static_cast<float>(s->floats[i]);
  }
  // Byte fallback: <0xXX>, or else a token that is the byte itself (llama.cpp).
  for (int b = 0; b < 256; ++b) {
    static const char* hex = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    byte_tokens_[b] = lookup(std::string_view(name, 6));
    if (byte_tokens_[b] < 0) byte_tokens_[b] = lookup(std::string(1, static_cast<char>(b)));
  }
  build_pieces();
}

void SpmTokenizer::encode_text(std::string_view raw, bool after_special,
                               std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() * 2 + kSpace.size());
  if (add_space_prefix_ && after_special) text += kSpace;
  for (char c : raw) {
    if (c == ' ') text += kSpace;
    else text += c;
  }
  if (text.empty()) return;

  std::vector<Symbol> sym = split_chars(text);
  merge_symbols(text, sym, [&](std::string_view merged, size_t) -> std::optional<double> {
    const int32_t id = lookup(merged);
    if (id < 0) return std::nullopt;
    return scores_[id];
  });

  for (int i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = std::string_view(text).substr(sym[i].start, sym[i].n);
    const int32_t id = lookup(piece);
    if (id >= 0) {
      out.push_back(id);
    } else {
      for (char c : piece) push_byte(static_cast<uint8_t>(c), out);
    }
  }
}

void SpmTokenizer::push_byte(uint8_t b, std::vector<int32_t>& out) const {
  if (byte_tokens_[b] >= 0) {
    out.push_back(byte_tokens_[b]);
  } else if (unk_id_ >= 0) {
    out.push_back(unk_id_);
  }
}

std::string SpmTokenizer::plain_piece(int32_t id) const {
  const std::string& t = tokens_[id];
  if (token_types_[id] == kTypeByte) {
    const int b = parse_byte_token(t);
    if (b >= 0) return std::string(1, static_cast<char>(b));
  }
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += t[i++];
    }
  }
  return out;
}

}  // namespace nexus::tok
