// `nexus pull` and `-m hf:...`: a model reference to a verified file in the store.
#pragma once

#include <string>

#include "store/download.h"
#include "store/model_ref.h"
#include "store/registry.h"

namespace nexus::store {

struct PullResult {
  std::string name;  // the stored name (model_store.h)
  std::string path;
  bool downloaded = false;  // false: it was in the store already
};

// Asks the registry which file `ref` is and downloads it into the store at
// `root` unless it is there. Throws as resolve_remote and download_verified do.
PullResult pull_model(const ModelRef& ref, const std::string& root, const RegistryConfig& cfg,
                      const DownloadOptions& opt);

// The stored file when find_local finds it (no network, so this works
// offline), else pull_model's.
PullResult ensure_model(const ModelRef& ref, const std::string& root, const RegistryConfig& cfg,
                        const DownloadOptions& opt);

}  // namespace nexus::store
