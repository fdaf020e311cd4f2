// The `nexus` command line (run_cli.h): subcommands registered by
// src/cli/cmd_*.cpp.
#include "cli/run_cli.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>

#include "cli/command.h"
#include "util/error.h"

namespace nexus::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}

int run_cli(int argc, char** argv) {
  CLI::App app{"nexus: a low-latency LLM inference engine and server", "nexus"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nexus 0.1.0");

  std::function<int()> run;
  for (const Command& c : command_registry()) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    auto fn = std::make_shared<std::function<int()>>();
    *fn = c.setup(*sub);
    sub->callback([fn, &run] { run = *fn; });
  }
  // With no arguments CLI11 only says "a subcommand is required": show the list.
  if (argc == 1) {
    std::fprintf(stderr, "%s", app.help().c_str());
    return 2;
  }
  // CLI11 reports an unknown first word as "a subcommand is required"; name it.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    const auto& reg = command_registry();
    if (std::none_of(reg.begin(), reg.end(), [&](const Command& c) { return c.name == word; })) {
      std::fprintf(stderr, "nexus: unknown subcommand '%s' (see nexus --help)\n", word.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, as an unknown
    // subcommand does (CLI11's own codes, 105-109, say nothing to a shell).
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run ? run() : 0;
  } catch (const UsageError& e) {
    // Worded and numbered as CLI11's own usage errors above.
    std::fprintf(stderr, "%s\nRun with --help for more information.\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nexus: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace nexus::cli
