// run_bench: a whole `nexus bench` run against one server.
//
// The transport is HTTP + SSE, or WebSocket sessions with `websocket`.
//   1. preflight: GET /v1/models (bounded by min(timeout, 10 s)). A server
//      that cannot be reached is a nexus::Error (no load is sent). Without
//      a model name, the first listed model id is used; a server without
//      /v1/models gets requests without "model".
//   2. warmup: `warmup` sessions, closed loop, results discarded.
//   3. one phase per load level: the single level from `load`, or one per
//      entry of sweep_concurrency / sweep_rate. Every phase replays the same
//      sessions (same seed and indices), so levels are comparable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/http_transport.h"
#include "loadgen/report.h"
#include "loadgen/runner.h"

namespace nexus::loadgen {

struct BenchOptions {
  HttpTransportOptions http;           // server, keep-alive, timeout, api key, extra body
  bool websocket = false;              // WebSocket sessions (ws_transport.h) instead of HTTP + SSE
  WorkloadOptions workload;            // model: "" = ask /v1/models
  LoadOptions load;                    // concurrency or rate, sessions and/or duration
  uint64_t warmup = 0;
  std::vector<int32_t> sweep_concurrency;
  std::vector<double> sweep_rate;
  std::optional<double> price_per_hour;
  bool progress = false;               // live bar on stderr
  std::string prompts_file;            // for the report only (prompts are in workload)
  std::function<void(const std::string&)> log;  // status lines ("warmup: ..."); empty = quiet
};

BenchReport run_bench(BenchOptions opts);

}  // namespace nexus::loadgen
