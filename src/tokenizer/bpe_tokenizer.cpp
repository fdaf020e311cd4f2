#include "tokenizer/bpe_tokenizer.h"

#include <array>
#include <optional>

#include "gguf/gguf_file.h"
#include "tokenizer/symbol_merge.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nexus::tok {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// bytes_to_unicode (GPT-2 encoder.py): printable Latin-1 bytes stand for
// themselves; the other 68 bytes get U+0100.. in byte order.
struct ByteTable {
  std::array<std::string, 256> text;
  std::array<int16_t, 0x144> byte_of;  // code point -> byte, -1 if none
  ByteTable() {
    byte_of.fill(-1);
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : 256 + extra++;
      utf8::append(text[b], cp);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

// SentencePiece's U+2581 back to spaces.
std::string unescape_spaces(std::string_view t) {
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

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return table().text[b]; }

int unicode_to_byte(uint32_t cp) { return cp < table().byte_of.size() ? table().byte_of[cp] : -1; }

BpeTokenizer::BpeTokenizer(const GgufFile& gguf, std::string_view pre_override) {
  pre_ = std::make_unique<PreTokenizer>(
      pre_override.empty() ? gguf.get_string("tokenizer.ggml.pre").value_or("") : std::string(pre_override));
  load_common(gguf, VocabModel::kBpe, pre_->add_bos_default());

  const GgufArray* merges = gguf.get_array("tokenizer.ggml.merges");
  if (!merges) throw Error("tokenizer: tokenizer.ggml.merges is missing (required for gpt2)");
  if (merges->elem_type != GgufValueType::STRING) {
    throw Error("tokenizer: tokenizer.ggml.merges is not an array of strings");
  }
  ranks_.reserve(merges->strings.size());
  for (size_t i = 0; i < merges->strings.size(); ++i) {
    const std::string& m = merges->strings[i];
    // "left right"; the first character may itself be a space in odd vocabularies.
    const size_t sp = m.size() < 2 ? std::string::npos : m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      throw Error("tokenizer: merge " + std::to_string(i) + " ('" + m +
                  "') is not of the form 'left right'");
    }
    ranks_.emplace(m, static_cast<int32_t>(i));  // first occurrence wins
  }
  byte_tokens_.fill(-1);
  if (!pre_->byte_encode()) {
    for (int b = 0; b < 256; ++b) {
      static const char* hex = "0123456789ABCDEF";
      const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
      byte_tokens_[b] = lookup(std::string_view(name, 6));
    }
  }
  build_pieces();
}

int32_t BpeTokenizer::rank(std::string_view left, std::string_view right, std::string& key) const {
  key.assign(left);
  key += ' ';
  key += right;
  const auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_text(std::string_view text, bool /*after_special*/,
                               std::vector<int32_t>& out) const {
  std::string word;
  if (!pre_->byte_encode()) {
    // SentencePiece-shaped BPE (llama.cpp's escape_whitespaces): spaces
    // become U+2581 before the split, and words stay raw UTF-8.
    std::string escaped;
    escaped.reserve(text.size() * 2);
    for (char c : text) {
      if (c == ' ') escaped += kSpace;
      else escaped += c;
    }
    for (std::string_view piece : pre_->split(escaped)) {
      // llama.cpp (Gemma 4): a run of newlines that is a token is emitted whole.
      if (piece.find_first_not_of('\n') == std::string_view::npos) {
        if (const int32_t id = lookup(piece); id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      encode_word(piece, out);
    }
    return;
  }
  for (std::string_view piece : pre_->split(text)) {
    word.clear();
    for (char c : piece) word += byte_to_unicode(static_cast<uint8_t>(c));
    encode_word(word, out);
  }
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (pre_->ignore_merges()) {
    if (const int32_t id = lookup(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> sym = split_chars(word);
  std::string key;
  merge_symbols(word, sym, [&](std::string_view merged, size_t left_len) -> std::optional<double> {
    const int32_t rk = rank(merged.substr(0, left_len), merged.substr(left_len), key);
    if (rk < 0) return std::nullopt;
    return -static_cast<double>(rk);  // lowest rank first
  });
  auto text_of = [&](int i) { return word.substr(sym[i].start, sym[i].n); };

  for (int i = 0; i != -1 && !sym.empty(); i = sym[i].next) {
    const std::string_view s = text_of(i);
    if (const int32_t id = lookup(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    if (!pre_->byte_encode()) {
      // Raw UTF-8: the bytes as <0xXX> tokens; a byte without one is dropped.
      for (char c : s) {
        if (const int32_t id = byte_tokens_[static_cast<uint8_t>(c)]; id >= 0) out.push_back(id);
      }
      continue;
    }
    // Not a token: fall back to its characters, each one byte-level byte.
    for (size_t off = 0; off < s.size();) {
      const size_t len = utf8::decode(s, off).len;
      // A byte without a token is dropped, as in llama.cpp (StarCoder's
      // vocabulary lacks C0, C1, F1 and F5..FF). Not unk: that is often the
      // end-of-text token, which must not appear inside a prompt.
      if (const int32_t id = lookup(s.substr(off, len)); id >= 0) out.push_back(id);
      off += len;
    }
  }
}

std::string BpeTokenizer::user_defined_piece(int32_t id) const {
  if (pre_->byte_encode()) return tokens_[id];
  return unescape_spaces(tokens_[id]);
}

std::string BpeTokenizer::plain_piece(int32_t id) const {
  const std::string& t = tokens_[id];
  std::string out;
  out.reserve(t.size());
  if (!pre_->byte_encode()) {
    // <0xXX> is a byte whether or not the file typed it so.
    if (const int b = parse_byte_token(t); b >= 0) return std::string(1, static_cast<char>(b));
    return unescape_spaces(t);
  }
  for (size_t off = 0; off < t.size();) {
    const utf8::Decoded d = utf8::decode(t, off);
    const int b = d.valid ? unicode_to_byte(d.cp) : -1;
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      // Not a byte-level character (e.g. an added token typed normal): keep it.
      out.append(t, off, d.len);
    }
    off += d.len;
  }
  return out;
}

}  // namespace nexus::tok
