// The local model store: files pulled from a registry, one per model, at
//   ROOT/hf/OWNER/REPO/FILE.gguf    (name hf:OWNER/REPO/FILE.gguf)
//   ROOT/ollama/NS/NAME/TAG.gguf    (name ollama:NAME:TAG; NS/NAME when NS is not "library")
// ROOT is $NEXUS_HOME/models, else $XDG_CACHE_HOME/nexus/models, else
// ~/.cache/nexus/models. A file is there only once its SHA-256 was checked:
// downloads grow in FILE.gguf.partial and are renamed on success; FILE.gguf.lock
// serialises pulls of one file (download.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/model_ref.h"

namespace nexus::store {

// Throws Error when neither NEXUS_HOME, XDG_CACHE_HOME nor HOME is set.
std::string store_root();

struct StoredModel {
  std::string name;  // hf:OWNER/REPO/FILE.gguf or ollama:NAME:TAG
  std::string path;
  uint64_t size = 0;  // bytes
  std::string type;   // the file type (general.file_type's mix name, e.g. Q4_K_M, else the commonest tensor type)
  std::string arch;   // general.architecture; "?" when the file cannot be read
};

// Every complete model under `root`, sorted by name (partial and lock files skipped).
std::vector<StoredModel> list_models(const std::string& root);

// The stored file `ref` names, without asking a registry: its file, the one
// file carrying its quantization tag, with neither the only GGUF of the
// repository; an Ollama NAME:TAG. nullopt when not there; throws Error when
// several stored files match a tag.
std::optional<std::string> find_local(const std::string& root, const ModelRef& ref);

// Deletes the model named `name` (a stored name as list_models gives it, or
// a reference find_local resolves) and its leftover partial/lock files;
// returns the stored name. Throws Error when nothing matches or a pull of it
// is running.
std::string remove_model(const std::string& root, const std::string& name);

}  // namespace nexus::store
