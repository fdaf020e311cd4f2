#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <array>

#include "tokenizer/pre_families.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nexus::tok {

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::string_view pre) {
  // llama.cpp: a missing pre-tokenizer falls back to "default" (with a
  // warning that quality may suffer); we do the same.
  const std::string_view name = pre.empty() ? std::string_view("default") : pre;
  const PreFamily* fam = find_pre_family(name);
  if (!fam) {
    throw Error("unknown pre-tokenizer '" + std::string(pre) +
                "' (tokenizer.ggml.pre); known: " + known_names());
  }
  if (fam->refused) {
    throw Error("pre-tokenizer '" + std::string(name) + "' (tokenizer.ggml.pre) is not supported: " +
                fam->refused);
  }
  family_ = fam->family;
  ignore_merges_ = fam->ignore_merges;
  add_bos_default_ = fam->add_bos;
  byte_encode_ = fam->byte_encode;
  for (const char* pattern : fam->regexes) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto re = std::make_unique<Regex>();
    // DOLLAR_ENDONLY: ECMAScript semantics ($ only at the very end), which
    // the tokenizer.json regexes were written for.
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                             &err, &err_off, nullptr);
    if (!re->code) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(err, msg.data(), msg.size());
      throw Error("pre-tokenizer '" + family_ + "': regex does not compile at offset " +
                  std::to_string(err_off) + ": " + reinterpret_cast<const char*>(msg.data()));
    }
    // JIT is an optimisation only; without it pcre2_match interprets.
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(re));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& re : regexes_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(re->code, nullptr), &pcre2_match_data_free);
    if (!md) throw Error("pre-tokenizer: out of memory");
    next.clear();
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t pos = 0;   // where the search resumes
      size_t done = 0;  // end of the last emitted piece
      while (pos < piece.size()) {
        const int rc = pcre2_match(re->code, subject, piece.size(), pos, 0, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          std::array<PCRE2_UCHAR, 256> msg{};
          pcre2_get_error_message(rc, msg.data(), msg.size());
          throw Error("pre-tokenizer '" + family_ + "': match failed: " +
                      reinterpret_cast<const char*>(msg.data()));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t mb = ov[0], me = ov[1];
        if (me == mb) {
          // An empty match (superbpe's lookahead) splits the piece there, as
          // llama.cpp's regex split does; the search resumes one character on.
          if (mb > done) {
            next.push_back(piece.substr(done, mb - done));
            done = mb;
          }
          if (mb >= piece.size()) break;
          pos = mb + utf8::decode(piece, mb).len;
          continue;
        }
        if (mb > done) next.push_back(piece.substr(done, mb - done));
        next.push_back(piece.substr(mb, me - mb));
        done = pos = me;
      }
      if (done < piece.size()) next.push_back(piece.substr(done));
    }
    pieces.swap(next);
  }
  return pieces;
}

std::string PreTokenizer::known_names() {
  std::string s;
  for (const PreFamily& f : pre_families()) {
    if (f.refused) continue;
    for (const char* n : f.names) {
      if (!s.empty()) s += ", ";
      s += n;
    }
  }
  return s;
}

}  // namespace nexus::tok
