// Runner: drives one benchmark phase, closed or open loop.
//
// Closed loop (rate == 0): `concurrency` workers, each with its own
// Transport, run sessions back to back: a new session starts only when one
// finishes, so the load adapts to the server (at most `concurrency` requests
// in flight).
// Open loop (rate > 0): sessions start at Poisson arrival times
// (arrivals.h), whatever the server's state; each runs on an idle worker,
// and workers (each with its own Transport) are added as needed up to
// max_inflight. An arrival that finds all max_inflight workers busy waits;
// its delay shows as start_delay_ms in the records.
// A session stops at its first failed turn (the history would be broken).
// The phase ends when `sessions` sessions have started and finished, or
// when duration_s has passed (no new session starts after it; running ones
// finish), whichever comes first.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "loadgen/transport.h"
#include "loadgen/workload.h"

namespace nexus::loadgen {

struct LoadOptions {
  int32_t concurrency = 1;             // closed loop workers (used when rate == 0)
  double rate = 0;                     // > 0: open loop, sessions per second
  std::optional<uint64_t> sessions;    // sessions to run
  std::optional<double> duration_s;    // or for this long (at least one of the two)
  int32_t max_inflight = 1024;         // open loop: worker cap
  uint64_t first_session = 0;          // index of the phase's first session in the Workload
  uint64_t seed = 0;                   // of the arrival process
};

struct RequestRecord {
  uint64_t session = 0;   // index within the phase (0-based)
  int32_t turn = 0;
  int32_t max_tokens = 0;
  Clock::time_point scheduled;  // when the request was due: arrival time (turn 0, open loop) or issue time
  RequestResult result;
};

struct PhaseRun {
  Clock::time_point start, end;   // phase start; last request's end
  std::vector<RequestRecord> records;  // in completion order
  uint64_t sessions = 0;          // sessions started
  uint64_t connections_opened = 0;
  int32_t workers = 0;            // transports used (peak concurrency)
};

// Called (serialised, from worker threads) after each request.
using RecordCallback = std::function<void(const RequestRecord&)>;

PhaseRun run_phase(const Workload& workload, const TransportFactory& transports, const LoadOptions& load,
                   const RecordCallback& on_record = {});

}  // namespace nexus::loadgen
