#include "tokenizer/spm_tokenizer.h"

#include <queue>

#include "gguf/gguf_file.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nexus::tok {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

struct Symbol {
  int prev, next;  // linked list of live symbols (-1: none)
  size_t start, n; // bytes of the text; n == 0 once merged into its left neighbour
};

struct Bigram {
  int left, right;
  float score;
  size_t size;  // bytes of the merged text, to detect stale entries
};

// Highest score first; on ties the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

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

  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = utf8::decode(text, off).len;
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const size_t size = sym[l].n + sym[r].n;  // live neighbours are contiguous
    const int32_t id = lookup(std::string_view(text).substr(sym[l].start, size));
    if (id < 0) return;
    queue.push({l, r, scores_[id], size});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& left = sym[bg.left];
    Symbol& right = sym[bg.right];
    // Stale: one side was merged away, or grew, since the pair was queued.
    if (left.n == 0 || right.n == 0 || left.n + right.n != bg.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = bg.left;
    try_add(left.prev, bg.left);
    try_add(bg.left, left.next);
  }

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
