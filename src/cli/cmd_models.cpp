// `nexus models`: the built-in model and the models in the store, with size,
// type and architecture read from each GGUF.
#include <fmt/format.h>

#include <algorithm>

#include "assets/builtin_model.h"
#include "cli/command.h"
#include "gguf/gguf_file.h"
#include "store/model_store.h"

namespace nexus::cli {
namespace {

std::string size_text(uint64_t n) {
  if (n >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", n / double(uint64_t{1} << 30));
  return fmt::format("{:.1f} MiB", n / double(uint64_t{1} << 20));
}

int list() {
  const std::string root = store::store_root();
  std::vector<store::StoredModel> models = store::list_models(root);
  const GgufFile gguf(builtin_model_bytes(), "built-in");
  store::StoredModel builtin{std::string(kBuiltinModelName) + " (built-in)", "", builtin_model_bytes().size(), "F16",
                             gguf.get_string("general.architecture").value_or("?")};
  models.insert(models.begin(), builtin);
  size_t w = 4;
  for (const auto& m : models) w = std::max(w, m.name.size());
  fmt::print("{:<{}}  {:>10}  {:<8}  {}\n", "NAME", w, "SIZE", "TYPE", "ARCH");
  for (const auto& m : models) fmt::print("{:<{}}  {:>10}  {:<8}  {}\n", m.name, w, size_text(m.size), m.type, m.arch);
  fmt::print("\nstore: {}\n", root);
  return 0;
}

std::function<int()> setup(CLI::App&) { return [] { return list(); }; }

const CommandRegistrar reg{{"models", "list the models in the store (nexus pull) and the built-in one", setup}};

}  // namespace
}  // namespace nexus::cli
