#include "cli/open_model.h"

#include <filesystem>

#include "assets/builtin_model.h"
#include "cli/store_args.h"
#include "cli/usage_error.h"
#include "store/model_store.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

// The -m model's message says how to pass one; another's names its role.
void require_file(const std::string& path, std::string_view role) {
  if (std::filesystem::exists(path)) return;
  if (role == kMainModel) throw Error("model file not found: " + path + " (pass one with -m PATH)");
  throw Error(std::string(role) + " file not found: " + path);
}

// A reference's file in the store, pulled first when it is not there.
std::string pulled_path(const std::string& ref) {
  return store::ensure_model(store::parse_model_ref(ref), store::store_root(), store::RegistryConfig::from_env(),
                             download_options())
      .path;
}

}  // namespace

OpenedModel open_model(const std::string& given, std::string_view role) {
  OpenedModel m;
  if (given.empty()) {
    m.gguf = std::make_unique<GgufFile>(builtin_model_bytes(), std::string(kBuiltinModelName) + " (built-in)");
    m.id = kBuiltinModelName;
    m.builtin = true;
    return m;
  }
  const std::string path = store::is_model_ref(given) ? pulled_path(given) : given;
  require_file(path, role);
  m.gguf = std::make_unique<GgufFile>(path);
  m.id = std::filesystem::path(path).stem().string();
  return m;
}

std::string model_file(const std::string& given, const std::string& what) {
  if (given.empty()) throw UsageError(what + " needs a model file: pass one with -m PATH (the built-in model is CPU only)");
  const std::string path = store::is_model_ref(given) ? pulled_path(given) : given;
  require_file(path, kMainModel);
  return path;
}

}  // namespace nexus::cli
