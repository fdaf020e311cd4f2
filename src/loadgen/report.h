// BenchReport: what `nexus bench` measured, with the settings that produced
// it. Rendered as JSON (report_json.h, schema in docs/bench.md) and as a
// text table (report_text.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loadgen/metrics.h"

namespace nexus::loadgen {

struct BenchConfig {
  std::string url;
  std::string endpoint = "completions";   // "completions" | "chat" | "responses" | "messages"
  std::string transport = "http";         // "http" (new connection per request) | "http-keepalive" | "ws"
  std::string model;                      // "" = none sent
  std::string mode = "closed";            // "closed" (concurrency) | "open" (rate)
  int32_t concurrency = 1;
  double rate = 0;
  std::optional<uint64_t> requests;       // sessions per phase
  std::optional<double> duration_s;
  int32_t turns = 1;
  int32_t preamble_tokens = 0;            // words of the shared system preamble (0 = none)
  bool warm_up = false;                   // Responses over ws: generate:false warm-up before turn 1
  std::string prompt_tokens, max_tokens;  // distribution specs
  bool ignore_eos = false;
  std::string prompts_file;
  uint64_t seed = 0;
  uint64_t warmup = 0;
  double timeout_s = 0;
  std::optional<double> price_per_hour;
  std::vector<int32_t> sweep_concurrency;
  std::vector<double> sweep_rate;
};

struct BenchReport {
  BenchConfig config;
  std::vector<PhaseReport> phases;  // one per load level (one without a sweep)
};

}  // namespace nexus::loadgen
