// `nexus rm NAME`: delete a model from the store.
#include <cstdio>

#include "cli/command.h"
#include "store/model_store.h"

namespace nexus::cli {
namespace {

int rm(const std::string& name) {
  const std::string removed = store::remove_model(store::store_root(), name);
  std::fprintf(stderr, "nexus: removed %s\n", removed.c_str());
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto name = std::make_shared<std::string>();
  sub.add_option("model", *name, "a name nexus models lists, or the hf:/ollama: reference it was pulled with")->required();
  return [name] { return rm(*name); };
}

const CommandRegistrar reg{{"rm", "delete a model from the store", setup}};

}  // namespace
}  // namespace nexus::cli
