#include "store/pull.h"

#include <filesystem>

#include "store/model_store.h"

namespace nexus::store {

PullResult pull_model(const ModelRef& ref, const std::string& root, const RegistryConfig& cfg,
                      const DownloadOptions& opt) {
  RemoteFile file;
  try {
    file = resolve_remote(ref, cfg);
  } catch (const NetworkError& e) {
    if (e.connected()) throw;
    throw NetworkError(ref.text + ": cannot reach " + e.what() + ": offline? (it is not in the store " + root + ")",
                       false);
  }
  PullResult r;
  r.name = file.name;
  r.path = (std::filesystem::path(root) / file.store_rel).string();
  r.downloaded = download_verified(file, r.path, opt);
  return r;
}

PullResult ensure_model(const ModelRef& ref, const std::string& root, const RegistryConfig& cfg,
                        const DownloadOptions& opt) {
  if (const auto path = find_local(root, ref)) return {ref.text, *path, false};
  return pull_model(ref, root, cfg, opt);
}

}  // namespace nexus::store
