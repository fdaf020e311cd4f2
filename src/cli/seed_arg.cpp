#include "cli/seed_arg.h"

#include <charconv>
#include <cstdio>
#include <random>

namespace nexus::cli {
namespace {

constexpr const char* kRandom = "-1";

bool parse_seed(const std::string& text, uint64_t& v) {
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);  // no sign: "-2" fails
  return ec == std::errc() && at == end && !text.empty();
}

}  // namespace

CLI::Option* add_seed_option(CLI::App& sub, std::string& text, const std::string& help) {
  return sub.add_option("--seed", text, help)
      ->type_name("INT")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& t) -> std::string {
            uint64_t v = 0;
            if (t == kRandom || parse_seed(t, v)) return {};
            return t + " is not a seed: use 0 to 18446744073709551615, or -1 for a random one";
          },
          ""));
}

uint64_t resolve_seed(const std::string& text, const char* who) {
  uint64_t seed = 0;
  if (parse_seed(text, seed)) return seed;
  std::random_device rd;
  seed = uint64_t{rd()} << 32 | rd();
  if (who) {
    const auto n = static_cast<unsigned long long>(seed);
    std::fprintf(stderr, "%s: seed %llu (random; --seed %llu repeats it)\n", who, n, n);
  }
  return seed;
}

}  // namespace nexus::cli
