// A shared model file opened for tests: the mapped GGUF, its tokenizer and
// its weights, loaded once per path for the whole test binary.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace nexus::test {

struct LoadedModel {
  explicit LoadedModel(const std::string& path) : gguf(path), tok(Tokenizer::from_gguf(gguf)), model(gguf) {}
  GgufFile gguf;
  std::unique_ptr<Tokenizer> tok;
  LlamaModel model;
};

// Throws whatever loading throws (nexus::Error for a bad file).
inline LoadedModel& loaded_model(const std::string& path) {
  static std::map<std::string, std::unique_ptr<LoadedModel>> cache;
  auto& slot = cache[path];
  if (!slot) slot = std::make_unique<LoadedModel>(path);
  return *slot;
}

}  // namespace nexus::test
