// `nexus pull REF`: download a model from Hugging Face or Ollama into the
// store (src/store, docs/models.md); prints its path on stdout.
#include <cstdio>

#include "cli/command.h"
#include "cli/store_args.h"
#include "store/model_store.h"

namespace nexus::cli {
namespace {

int pull(const std::string& text) {
  const store::ModelRef ref = store::parse_model_ref(text);
  const store::PullResult r =
      store::pull_model(ref, store::store_root(), store::RegistryConfig::from_env(), download_options());
  if (!r.downloaded) std::fprintf(stderr, "nexus: %s is in the store already\n", r.name.c_str());
  std::printf("%s\n", r.path.c_str());
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto ref = std::make_shared<std::string>();
  sub.add_option("model", *ref, "hf:OWNER/REPO[:QUANT|/FILE.gguf] or ollama:NAME[:TAG]")
      ->required()
      ->check(parses_with([](const std::string& t) { store::parse_model_ref(t); }));
  sub.footer(
      "Stores in $NEXUS_HOME/models (default ~/.cache/nexus/models). HF_TOKEN is sent to Hugging Face; "
      "HF_ENDPOINT and NEXUS_OLLAMA_REGISTRY replace the registries' addresses.");
  return [ref] { return pull(*ref); };
}

const CommandRegistrar reg{{"pull", "download a model from Hugging Face (hf:) or Ollama (ollama:) into the store", setup}};

}  // namespace
}  // namespace nexus::cli
