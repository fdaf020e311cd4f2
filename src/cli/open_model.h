// The model a command opens from its -m option, one rule for every command.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"

namespace nexus::cli {

struct OpenedModel {
  std::unique_ptr<GgufFile> gguf;
  // The id clients name in "model": the file's stem (e.g. "stories260K"),
  // which unlike general.name ("llama" in many files) tells models apart;
  // kBuiltinModelName for the built-in model.
  std::string id;
  bool builtin = false;
};

// `given` empty: the built-in model (assets/builtin_model.h), parsed in
// place from the binary's own bytes; nothing on disk is consulted.
// A reference hf:OWNER/REPO[:QUANT|/FILE.gguf] or ollama:NAME[:TAG]: its file
// in the store (store/pull.h), pulled first when it is not there (the id is
// the file's stem). Otherwise a GGUF file path. Throws Error "model file not found: PATH
// (pass one with -m PATH)" when the file is absent -- for another `role`
// (a draft model, a base model), "<role> file not found: PATH" -- and
// GgufFile's errors for a file that is not a valid GGUF.
inline constexpr std::string_view kMainModel = "model";
OpenedModel open_model(const std::string& given, std::string_view role = kMainModel);

// For the commands that need a file on disk (the CUDA backend): `given`
// when the file exists. Throws UsageError when `given` is empty (the
// built-in model is not a file) and Error "model file not found" as above.
std::string model_file(const std::string& given, const std::string& what);

}  // namespace nexus::cli
