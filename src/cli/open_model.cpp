#include "cli/open_model.h"

#include <filesystem>

#include "assets/builtin_model.h"
#include "cli/usage_error.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

void require_file(const std::string& path) {
  if (!std::filesystem::exists(path)) throw Error("model file not found: " + path + " (pass one with -m PATH)");
}

}  // namespace

OpenedModel open_model(const std::string& given) {
  OpenedModel m;
  if (given.empty()) {
    m.gguf = std::make_unique<GgufFile>(builtin_model_bytes(), std::string(kBuiltinModelName) + " (built-in)");
    m.id = kBuiltinModelName;
    m.builtin = true;
    return m;
  }
  require_file(given);
  m.gguf = std::make_unique<GgufFile>(given);
  m.id = std::filesystem::path(given).stem().string();
  return m;
}

std::string model_file(const std::string& given, const std::string& what) {
  if (given.empty()) throw UsageError(what + " needs a model file: pass one with -m PATH (the built-in model is CPU only)");
  require_file(given);
  return given;
}

}  // namespace nexus::cli
