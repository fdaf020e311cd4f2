// Helpers shared by the tests: where the shared models are, and how a test
// reacts when one is missing (CI=true: failure; elsewhere: skip with a message).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace nexus::test {

// Absolute path of ../shared/models/<rel>, resolved from the repository root.
std::string shared_model_path(const std::string& rel);

// Whether the file exists; when it does not, records a failure under CI=true
// or a skip elsewhere (the caller must then return).
bool require_file(const std::string& path);

// The `nexus` binary built alongside the tests.
std::string nexus_binary();

// A fresh temporary directory (removed by the OS's tmp cleaning, not by us).
std::string make_temp_dir();

// The whole contents of a file ("" when it cannot be read).
std::string read_file(const std::string& path);

// The first number (decimal, optional exponent) after `label` in `text`;
// NaN when `label` or a number after it is absent.
double number_after(const std::string& text, const std::string& label);

// `s` quoted for a POSIX shell.
std::string shell_quote(const std::string& s);

struct CommandResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  std::string out, err;
};

// Runs `nexus ARGS` (ARGS as shell words, already quoted) with `stdin_text`
// on its standard input; stdout and stderr are captured separately.
CommandResult run_nexus(const std::string& args, const std::string& stdin_text = "");

}  // namespace nexus::test

// Use at the top of a TEST body: skips (or fails under CI) when the shared
// file is missing. Defines a std::string variable `var` with its path.
#define NEXUS_REQUIRE_SHARED(var, rel)                                    \
  const std::string var = ::nexus::test::shared_model_path(rel);          \
  if (!::nexus::test::require_file(var)) {                                \
    if (::testing::Test::HasFailure()) return;                            \
    GTEST_SKIP() << "missing shared file " << var << " (set CI=true to fail instead)"; \
  }
