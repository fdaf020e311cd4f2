// VocabTokenizer::load_common: reads and validates the tokenizer.* metadata
// that both models share (see vocab_tokenizer.h for the rules followed).
#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/vocab_tokenizer.h"
#include "util/error.h"

namespace nexus::tok {
namespace {

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::UINT16:
    case GgufValueType::INT16: case GgufValueType::UINT32: case GgufValueType::INT32:
    case GgufValueType::UINT64: case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int parse_byte_token(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int v = 0;
  for (char c : s.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else return -1;
  }
  return v;
}

void VocabTokenizer::load_common(const GgufFile& gguf, VocabModel model, bool add_bos_default) {
  const GgufArray* toks = gguf.get_array("tokenizer.ggml.tokens");
  if (!toks) throw Error("tokenizer: tokenizer.ggml.tokens is missing");
  if (toks->elem_type != GgufValueType::STRING) {
    throw Error("tokenizer: tokenizer.ggml.tokens is not an array of strings");
  }
  const size_t n = toks->strings.size();
  if (n == 0) throw Error("tokenizer: tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("tokenizer: vocabulary too large (" + std::to_string(n) + " tokens)");
  }
  tokens_ = toks->strings;

  token_types_.assign(n, kTypeNormal);
  if (const GgufArray* types = gguf.get_array("tokenizer.ggml.token_type")) {
    if (!is_integer_type(types->elem_type) || types->ints.size() != n) {
      throw Error("tokenizer: tokenizer.ggml.token_type must be " + std::to_string(n) +
                  " integers (one per token), got " + std::to_string(types->size()) + " of type " +
                  std::string(gguf_value_type_name(types->elem_type)));
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = types->ints[i];
      if (t < kTypeUndefined || t > kTypeByte) {
        throw Error("tokenizer: token " + std::to_string(i) + " has unknown token_type " +
                    std::to_string(t));
      }
      token_types_[i] = static_cast<int32_t>(t);
    }
  } else if (model == VocabModel::kSpm) {
    // Without types, SentencePiece byte tokens are still recognisable by name.
    for (size_t i = 0; i < n; ++i) {
      if (parse_byte_token(tokens_[i]) >= 0) token_types_[i] = kTypeByte;
    }
  }

  // Views into tokens_, which is never modified from here on. The first of
  // duplicate texts wins; empty texts cannot be looked up or split out.
  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!tokens_[i].empty()) token_to_id_.emplace(tokens_[i], static_cast<int32_t>(i));
  }

  read_special_ids(gguf, model);

  add_bos_ = gguf.get_bool("tokenizer.ggml.add_bos_token").value_or(add_bos_default);
  if (add_bos_ && bos_id_ < 0) {
    throw Error("tokenizer: tokenizer.ggml.add_bos_token is set but there is no BOS token");
  }
  // The leading-space rule belongs to SentencePiece; byte-level BPE encodes
  // spaces itself (llama.cpp ignores the flag when encoding BPE).
  add_space_prefix_ = model == VocabModel::kSpm &&
                      gguf.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);

  collect_eog();

  for (size_t i = 0; i < n; ++i) {
    const int32_t t = token_types_[i];
    if ((t == kTypeControl || t == kTypeUserDefined || t == kTypeUnknown) && !tokens_[i].empty()) {
      special_ids_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [&](int32_t a, int32_t b) {
    return tokens_[a].size() > tokens_[b].size();
  });

  // llama.cpp: Phi-3's special tokens swallow whitespace to their right (its
  // tokenizer.json marks them rstrip), except <unk>, <s> and <|endoftext|>.
  rstrip_.assign(n, 0);
  const std::string name = lower(gguf.get_string("general.name").value_or(""));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : special_ids_) rstrip_[id] = 1;
    if (int32_t id = lookup("</s>"); id >= 0) rstrip_[id] = 1;
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = lookup(t); id >= 0) rstrip_[id] = 0;
    }
  }
}

void VocabTokenizer::read_special_ids(const GgufFile& gguf, VocabModel model) {
  const int64_t n = static_cast<int64_t>(tokens_.size());
  // SentencePiece defaults when the keys are absent (llama.cpp): <unk>=0, <s>=1, </s>=2.
  auto fallback = [&](int32_t id) { return model == VocabModel::kSpm && id < n ? id : -1; };
  bos_id_ = fallback(1);
  eos_id_ = fallback(2);
  unk_id_ = fallback(0);
  eot_id_ = eom_id_ = -1;
  struct Key {
    const char* key;
    int32_t* id;
  };
  int32_t pad = -1, sep = -1;
  for (const Key& k : {Key{"tokenizer.ggml.bos_token_id", &bos_id_},
                       Key{"tokenizer.ggml.eos_token_id", &eos_id_},
                       Key{"tokenizer.ggml.eot_token_id", &eot_id_},
                       Key{"tokenizer.ggml.eom_token_id", &eom_id_},
                       Key{"tokenizer.ggml.unknown_token_id", &unk_id_},
                       Key{"tokenizer.ggml.padding_token_id", &pad},
                       Key{"tokenizer.ggml.seperator_token_id", &sep}}) {
    const std::optional<int64_t> v = gguf.get_int(k.key);
    if (!v) continue;
    if (*v == -1 || *v == 0xFFFFFFFFLL) {  // "no such token"
      *k.id = -1;
      continue;
    }
    if (*v < 0 || *v >= n) {
      throw Error(std::string("tokenizer: ") + k.key + " = " + std::to_string(*v) +
                  " is outside the vocabulary [0, " + std::to_string(n) + ")");
    }
    *k.id = static_cast<int32_t>(*v);
  }
}

void VocabTokenizer::collect_eog() {
  eog_ids_.clear();
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end()) {
      eog_ids_.push_back(id);
    }
  };
  add(eos_id_);
  add(eot_id_);
  add(eom_id_);
  for (const char* text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                           "<|endoftext|>", "<|eom_id|>", "<EOT>"}) {
    const int32_t id = lookup(text);
    if (id < 0) continue;
    add(id);
    // llama.cpp: a control-looking token that is not typed control is a
    // conversion bug; treat it as control so it renders and splits as one.
    token_types_[id] = kTypeControl;
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
}

}  // namespace nexus::tok
