// run_cli: the whole `nexus` command line (its subcommands, usage errors
// and exit codes), for main.cpp and for the tests' nexus_faulty
// (tests/faulty/), which arms a test-only fault and then runs the same CLI.
#pragma once

namespace nexus::cli {

// Parses argv and runs the subcommand; returns the process's exit code (0,
// 1 for an error, 2 for a usage error).
int run_cli(int argc, char** argv);

}  // namespace nexus::cli
