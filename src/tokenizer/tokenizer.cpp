// Tokenizer (public API) and the shared half of VocabTokenizer: special-token
// splitting, BOS, pieces and lookups. Loading lives in vocab_loader.cpp, the
// two algorithms in spm_tokenizer.cpp and bpe_tokenizer.cpp.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "gguf/gguf_file.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/vocab_tokenizer.h"
#include "util/error.h"

namespace nexus {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  try {
    const std::optional<std::string> model = gguf.get_string("tokenizer.ggml.model");
    if (!model)
      throw Error(
          "tokenizer: tokenizer.ggml.model is missing (the file has no tokenizer; a model made by `nexus synth` "
          "gets one from --vocab-from FILE)");
    if (*model == "llama") return std::make_unique<tok::SpmTokenizer>(gguf);
    if (*model == "gpt2") return std::make_unique<tok::BpeTokenizer>(gguf);
    // Gemma 4: BPE over SentencePiece-style text; llama.cpp forces its pre.
    if (*model == "gemma4") return std::make_unique<tok::BpeTokenizer>(gguf, "gemma4");
    throw Error("tokenizer: unsupported tokenizer model '" + *model +
                "' (tokenizer.ggml.model; supported: llama, gpt2, gemma4)");
  } catch (const Error& e) {
    // Name the file, unless the GGUF reader already did.
    const std::string what = e.what();
    if (what.rfind(gguf.path(), 0) == 0) throw;
    throw Error(gguf.path() + ": " + what);
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool strip_leading_space) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, false);
  // Pieces before the first word are empty (BOS and other control tokens),
  // so the space add_space_prefix inserted is the first byte of the output.
  if (strip_leading_space && add_space_prefix_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

int32_t Tokenizer::find_token(std::string_view text) const {
  // Every Tokenizer from from_gguf is a VocabTokenizer (hash lookup); the
  // scan is only a fallback for other subclasses.
  if (const auto* v = dynamic_cast<const tok::VocabTokenizer*>(this)) return v->lookup(text);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

namespace tok {

int32_t VocabTokenizer::lookup(std::string_view text) const {
  const auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_bos,
                                            bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && add_bos_) out.push_back(bos_id_);
  encode_runs(text, parse_special, /*after_special=*/true, out);  // the first run counts as following a special token
  return out;
}

std::vector<int32_t> VocabTokenizer::encode_as_output(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  encode_runs(text, /*parse_special=*/false, /*after_special=*/false, out);
  return out;
}

void VocabTokenizer::encode_runs(std::string_view text, bool parse_special, bool after_special,
                                 std::vector<int32_t>& out) const {
  for (const Fragment& f : partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(text.substr(f.off, f.len), after_special, out);
      after_special = false;
    }
  }
}

// Splits `text` at literal special tokens. As in llama.cpp, tokens are
// processed one at a time, longest text first, each over all remaining text
// fragments, so a longer token wins over a shorter one it contains.
std::vector<VocabTokenizer::Fragment> VocabTokenizer::partition(std::string_view text,
                                                                bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_ids_) {
    const int32_t type = token_types_[id];
    if (!parse_special && type != kTypeUserDefined) continue;
    const std::string& tt = tokens_[id];
    if (text.find(tt) == std::string_view::npos) continue;  // cheap common case
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t off = f.off, len = f.len;
      while (len > 0) {
        const size_t m = text.substr(off, len).find(tt);
        if (m == std::string_view::npos) break;
        if (m > 0) next.push_back({-1, off, m});
        next.push_back({id, 0, 0});
        off += m + tt.size();
        len -= m + tt.size();
        if (rstrip_[id]) {
          while (len > 0 && std::isspace(static_cast<unsigned char>(text[off]))) ++off, --len;
        }
      }
      if (len > 0) next.push_back({-1, off, len});
    }
    frags.swap(next);
  }
  return frags;
}

void VocabTokenizer::build_pieces() {
  pieces_.resize(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    switch (token_types_[i]) {
      case kTypeNormal:
      case kTypeByte:
        pieces_[i] = plain_piece(static_cast<int32_t>(i));
        break;
      case kTypeUserDefined:
        pieces_[i] = user_defined_piece(static_cast<int32_t>(i));
        break;
      case kTypeControl:
      case kTypeUnknown:
        pieces_[i] = tokens_[i];
        break;
      default:  // unused / undefined: nothing to show (llama.cpp)
        break;
    }
  }
}

std::string VocabTokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(n_vocab()) + ")");
  }
  const int32_t type = token_types_[id];
  if (!render_special && (type == kTypeControl || type == kTypeUnknown)) return {};
  return pieces_[id];
}

}  // namespace tok
}  // namespace nexus
