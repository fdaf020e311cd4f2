// nexus: one binary, subcommands registered by src/cli/cmd_*.cpp (run_cli.h).
#include "cli/run_cli.h"

int main(int argc, char** argv) { return nexus::cli::run_cli(argc, argv); }
