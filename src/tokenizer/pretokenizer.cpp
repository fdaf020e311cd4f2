#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <array>
#include <initializer_list>

#include "util/error.h"

namespace nexus::tok {
namespace {

// The GPT-2 regex (openai/gpt-2 encoder.py). llama.cpp's custom splitter
// also takes a lone whitespace that the regex leaves unmatched; here that
// comes out as an in-between piece, with the same result.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3 (tokenizer.json of Meta-Llama-3), with the case-insensitive group
// written out as llama.cpp does.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but digits are split one by one.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Family {
  const char* family;
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> regexes;
  bool ignore_merges;
  bool add_bos;
};

// The `pre` values llama.cpp maps to each regex list (llama-vocab.cpp).
const std::array<Family, 8>& families() {
  static const std::array<Family, 8> k = {{
      {"default", {"default"},
       {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}, false, false},
      {"gpt2",
       {"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "gigachat", "jina-es",
        "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code"},
       {kGpt2}, false, false},
      {"llama3", {"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3}, true, true},
      // Same regex as llama3, but llama.cpp keeps merges and BOS defaults.
      {"dbrx", {"dbrx", "smaug-bpe"}, {kLlama3}, false, false},
      {"qwen2", {"qwen2", "stablelm2", "megrez"}, {kQwen2}, false, false},
      {"deepseek-coder", {"deepseek-coder"},
       {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)",
        // CJK ideographs, U+0800..U+4E00 and Hangul, as in DeepSeek's tokenizer.json.
        R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)", R"(\p{N})"},
       false, false},
      {"starcoder",
       {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2}, false, false},
      {"falcon", {"falcon"},
       {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}, false, false},
  }};
  return k;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::string_view pre) {
  // llama.cpp: a missing pre-tokenizer falls back to "default" (with a
  // warning that quality may suffer); we do the same.
  const std::string_view name = pre.empty() ? std::string_view("default") : pre;
  const Family* fam = nullptr;
  for (const Family& f : families()) {
    for (const char* n : f.names) {
      if (name == n) fam = &f;
    }
  }
  if (!fam) {
    throw Error("unknown pre-tokenizer '" + std::string(pre) +
                "' (tokenizer.ggml.pre); known: " + known_names());
  }
  family_ = fam->family;
  ignore_merges_ = fam->ignore_merges;
  add_bos_default_ = fam->add_bos;
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
        if (me == mb) {  // empty match (none of our regexes has one): step on
          pos = mb + 1;
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
  for (const Family& f : families()) {
    for (const char* n : f.names) {
      if (!s.empty()) s += ", ";
      s += n;
    }
  }
  return s;
}

}  // namespace nexus::tok
