// Metrics of one phase, derived from its request records (runner.h).
//
// Per request (times in ms, from the request's start, i.e. before connect):
//   TTFT  first chunk carrying text - start
//   ITL   gaps between consecutive text chunks (pooled over requests)
//   TPOT  (E2E - TTFT) / (completion_tokens - 1), completion_tokens > 1
//   E2E   end of the stream - start
// Latency statistics cover completed (successful) requests only; token sums
// use the server's usage of completed requests (a completed request without
// usage counts its text chunks instead and is counted in usage_missing).
// Throughputs divide by the phase duration (start to the last request's end).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/runner.h"
#include "loadgen/stats.h"

namespace nexus::loadgen {

struct RequestMetrics {
  uint64_t session = 0;
  int32_t turn = 0;
  bool ok = false;
  std::string error;          // error key ("http_400", "timeout", ...); "" when ok
  std::string error_message;
  int http_status = 0;
  double start_s = 0;         // request start, from the phase start
  double start_delay_ms = 0;  // start - when it was due (open loop queueing)
  double connect_ms = 0;
  bool reused_connection = false;
  std::optional<double> ttft_ms;
  double e2e_ms = 0;
  std::optional<double> tpot_ms;
  std::vector<double> chunk_times_ms;  // arrival of each text chunk, from the start
  int32_t max_tokens = 0;
  std::optional<int64_t> prompt_tokens, completion_tokens;  // server usage
  std::optional<int64_t> cached_tokens;                      // of prompt_tokens, KV reused by the server
  std::optional<double> server_ttft_ms;                      // the server's own TTFT (ws transport)
};

struct TurnSummary {
  int32_t turn = 0;
  Summary ttft_ms;
  // Means over the turn's completed requests with server usage: the prompt,
  // and of it the tokens read from the server's KV (the rest was prefilled).
  double prompt_tokens = 0, cached_tokens = 0;
};

struct PhaseReport {
  std::string label;
  int32_t concurrency = 0;  // closed loop workers (0 in open loop)
  double rate = 0;          // open loop sessions/s (0 in closed loop)
  double duration_s = 0;
  uint64_t sessions = 0, requests = 0, completed = 0, failed = 0;
  std::map<std::string, uint64_t> errors;  // error key -> count
  std::map<std::string, std::string> error_examples;  // error key -> its first message
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // of prompt_tokens: reused from the server's KV (when it reports it)
  uint64_t usage_missing = 0;
  uint64_t text_chunks = 0;
  uint64_t connections_opened = 0;
  double request_throughput = 0;       // completed requests / s
  double output_token_throughput = 0;  // completion tokens / s
  double total_token_throughput = 0;   // (prompt + completion) tokens / s
  std::optional<double> cost_per_million_output_tokens;  // with a price per hour
  Summary ttft_ms, itl_ms, tpot_ms, e2e_ms;
  std::vector<TurnSummary> ttft_by_turn;
  std::vector<RequestMetrics> requests_detail;  // sorted by (session, turn)
};

RequestMetrics request_metrics(const RequestRecord& rec, Clock::time_point phase_start);

// price_per_hour: USD per hour of the server, for the cost line.
PhaseReport analyze_phase(const PhaseRun& run, const std::string& label, int32_t concurrency, double rate,
                          std::optional<double> price_per_hour);

// USD per million output tokens at `tokens_per_s`; nullopt when it is 0.
std::optional<double> cost_per_million_tokens(double price_per_hour, double tokens_per_s);

}  // namespace nexus::loadgen
