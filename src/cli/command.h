// Subcommands of the `nexus` binary. Each cmd_*.cpp defines one and registers
// it with a static NEXUS_COMMAND(...) object, so main.cpp needs no list.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "cli/usage_error.h"
#include "model/kv_cache.h"

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

// Parses the whole of `text` as T (std::from_chars: an integer for integral
// T, decimal or exponent form otherwise) into v. Returns why it is not a T
// ("'abc' is not an integer"; "nan" and "inf" are not numbers either), or ""
// with out_of_range set when the text is a number T cannot hold.
template <class T>
std::string parse_whole(const std::string& text, T& v, bool& out_of_range) {
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  out_of_range = ec == std::errc::result_out_of_range;
  bool bad = at != end || text.empty() || (ec != std::errc() && !out_of_range);
  if constexpr (std::is_floating_point_v<T>) bad = bad || (ec == std::errc() && !std::isfinite(v));
  if (bad) return "'" + text + "' is not " + (std::is_integral_v<T> ? "an integer" : "a number");
  return {};
}

// A numeric option's check: the whole text must parse as T and lie in
// [lo, hi]. CLI::Range alone words "-n abc" as "Value abc not in range 1 to
// N"; this says "'abc' is not an integer" instead.
template <class T>
CLI::Validator range(T lo, T hi) {
  const std::string span = fmt::format("{} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, span](std::string& text) -> std::string {
        T v{};
        bool out_of_range = false;
        if (std::string why = parse_whole(text, v, out_of_range); !why.empty()) return why;
        if (out_of_range || v < lo || v > hi) return text + " is outside " + span;
        return {};
      },
      "[" + span + "]");
}

// The help of -m/--model, as every command that loads a model takes it.
inline constexpr const char* kModelHelp =
    "GGUF model file, or hf:OWNER/REPO[:QUANT] / ollama:NAME[:TAG] (pulled when missing); default: the built-in "
    "stories260K";

// A model path option's check (every option or argument that names a model
// file): "" names no model (an unset $MODEL expanded to nothing would
// otherwise load the built-in model, or no draft or base, without a word).
inline CLI::Validator model_path() {
  return CLI::Validator(
      [](std::string& text) -> std::string { return text.empty() ? "an empty path names no model" : ""; }, "PATH");
}

// A number that must exceed lo (a rate, a duration): "0 is not above 0"
// where CLI::PositiveNumber printed "Value 0 not in range 0.000000 to
// 1.797...e308". A number too small or too large for a double is refused.
inline CLI::Validator above(double lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        double v = 0;
        bool out_of_range = false;
        if (std::string why = parse_whole(text, v, out_of_range); !why.empty()) return why;
        if (out_of_range || !(v > lo)) return fmt::format("{} is not a number above {}", text, lo);
        return {};
      },
      fmt::format("(> {})", lo));
}

// A number of at least lo (a temperature): "-1 is below 0".
inline CLI::Validator at_least(double lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        double v = 0;
        bool out_of_range = false;
        if (std::string why = parse_whole(text, v, out_of_range); !why.empty()) return why;
        if (out_of_range) return text + " is out of range";
        if (v < lo) return fmt::format("{} is below {}", text, lo);
        return {};
      },
      fmt::format("(>= {})", lo));
}

// Any finite number (a penalty, which may be negative): "'nan' is not a number".
inline CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        bool out_of_range = false;
        if (std::string why = parse_whole(text, v, out_of_range); !why.empty()) return why;
        if (out_of_range) return text + " is out of range";
        return {};
      },
      "");
}

// A KV cache type name in any case (model/kv_cache.h kv_type_from_name):
// "'q4_0' is not a KV type: use f16, f32 or q8_0".
inline CLI::Validator kv_type_name() {
  return CLI::Validator(
      [](std::string& t) -> std::string {
        return kv_type_from_name(t) ? "" : "'" + t + "' is not a KV type: use f16, f32 or q8_0";
      },
      "");
}

// A check that calls parse(text), which throws Error on a bad value (a URL,
// a length distribution): its message becomes the usage error.
template <class Parse>
CLI::Validator parses_with(Parse parse, std::string description = "") {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      std::move(description));
}

// `--cors-allow-origin ORIGIN` (repeatable; `*` = any), as `nexus serve`
// and `nexus gateway` take it (server/cors.h): each value is an origin,
// scheme://host[:port] with no path, or *.
inline CLI::Option* add_cors_option(CLI::App& sub, std::vector<std::string>& origins) {
  return sub
      .add_option("--cors-allow-origin", origins,
                  "browser origin allowed to call the API (CORS), e.g. https://app.example.com; repeatable; * = any")
      ->expected(1)
      ->take_all()
      ->check(CLI::Validator(
          [](std::string& o) {
            if (o == "*") return std::string();
            const bool scheme = o.starts_with("http://") || o.starts_with("https://");
            const bool clean = o.find_first_of(" \t\r\n/,", o.find("//") + 2) == std::string::npos;
            return scheme && clean && o.size() > o.find("//") + 2
                       ? std::string()
                       : "'" + o + "' is not an origin (scheme://host[:port], no path) or *";
          },
          "ORIGIN"));
}

// -c/--ctx-size against the model's training context (0 = the model's):
// throws UsageError "--ctx-size: 9999 exceeds the model's context of 2048 tokens".
inline void check_ctx_size(int32_t n_ctx, int32_t n_ctx_train) {
  if (n_ctx > n_ctx_train)
    throw UsageError(fmt::format("--ctx-size: {} exceeds the model's context of {} tokens", n_ctx, n_ctx_train));
}

}  // namespace nexus::cli
