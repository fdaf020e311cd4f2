// The --seed option of run, bench and synth: an unsigned 64-bit integer, or
// -1 for a random seed, which is printed so that the run can be repeated.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace nexus::cli {

// Adds --seed to `sub`, read into `text` (its default stays as given). It
// takes 0 to 18446744073709551615, or -1; anything else is a usage error:
// "-2 is not a seed: use 0 to 18446744073709551615, or -1 for a random one"
// (CLI11 alone read -1 into a uint64_t as 2^64 - 1).
CLI::Option* add_seed_option(CLI::App& sub, std::string& text, const std::string& help);

// The seed `text` (checked by add_seed_option) names. For "-1", a fresh random
// seed, printed to stderr as "WHO: seed N (random; --seed N repeats it)"
// unless `who` is null (a greedy run, whose output no seed changes).
uint64_t resolve_seed(const std::string& text, const char* who);

}  // namespace nexus::cli
