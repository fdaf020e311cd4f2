// A model named by where it comes from: `hf:OWNER/REPO[:QUANT|/FILE.gguf]`
// (a Hugging Face repository) or `ollama:NAME[:TAG]` (the Ollama registry),
// as `nexus pull` and `-m` take them (docs/models.md).
#pragma once

#include <string>
#include <string_view>

namespace nexus::store {

enum class Registry { HuggingFace, Ollama };

struct ModelRef {
  Registry registry = Registry::HuggingFace;
  std::string text;  // as given
  // Hugging Face: the repository, and at most one of a quantization tag
  // ("Q4_K_M", matched case-insensitively against file names) or a file path
  // inside the repository ("sub/model-Q4_K_M.gguf").
  std::string owner, repo, quant, file;
  // Ollama: "llama3.2" (namespace library) or "user/model"; tag "latest" by default.
  std::string name, tag;
};

// Whether `s` is a reference (starts with "hf:" or "ollama:") rather than a path.
bool is_model_ref(std::string_view s);

// Throws nexus::Error naming what is wrong ("hf:owner: expected hf:OWNER/REPO...")
// for a malformed reference, or a component that could escape the store
// (empty, "..", characters outside [A-Za-z0-9._-]).
ModelRef parse_model_ref(std::string_view s);

// Whether a GGUF file name carries quantization tag `quant`: the tag,
// case-insensitively, bounded by characters other than letters, digits and
// '_' ("x-Q4_K_M.gguf" has Q4_K_M but not Q4_K).
bool file_has_quant(std::string_view file_name, std::string_view quant);

}  // namespace nexus::store
