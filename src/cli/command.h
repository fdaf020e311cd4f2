// Subcommands of the `nexus` binary. Each cmd_*.cpp defines one and registers
// it with a static NEXUS_COMMAND(...) object, so main.cpp needs no list.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace nexus::cli {

// setup adds the subcommand's options to `sub` and returns the function that
// runs it (called after parsing; its return value is the exit code).
struct Command {
  std::string name;
  std::string description;
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { command_registry().push_back(std::move(c)); }
};

// Default model when -m is not given: ../shared/models/stories260K.gguf
// relative to the repository root the binary was built from, or to the
// current directory. Returns the path (which may not exist).
std::string default_model_path();

// The model a command opens: `given`, or default_model_path() when it is
// empty. Throws util Error "model file not found: PATH (pass one with HOW)"
// when nothing is there, so every command words a missing model the same
// way; `how` names the command's option ("-m PATH", "MODEL").
std::string model_path(const std::string& given, const char* how = "-m PATH");

}  // namespace nexus::cli
