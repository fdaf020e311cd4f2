// LoadState: one replica's load as the gateway sees it.
//
// Reported: what the replica's GET /load said at the last poll (running
// sequences, waiting requests, KV blocks; docs/metrics.md). Corrected: the
// requests this gateway started or finished on it since that poll, so a
// burst between two polls is not all sent to the same replica:
//   queue  = max(in_flight, running + waiting + (in_flight - in_flight_at_poll))
//   score  = queue + kKvWeight * kv_utilization
// (kv_utilization in [0, 1]; a replica whose KV cache is full would preempt).
// Without a fresh poll (none yet, or the last failed) the score is the
// gateway's own in-flight count. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>

namespace nexus::gateway {

struct ReplicaLoad {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t kv_used_blocks = 0;
  int32_t kv_total_blocks = 0;
  double kv_utilization = 0;
  bool draining = false;
};

// Parses a GET /load body; nullopt when it is not the expected JSON object.
std::optional<ReplicaLoad> parse_load(std::string_view body);

class LoadState {
 public:
  static constexpr double kKvWeight = 2.0;

  void on_poll(const ReplicaLoad& l);
  void on_poll_failed();
  void begin_request();
  void end_request();
  double score() const;
  int32_t in_flight() const;
  std::optional<ReplicaLoad> reported() const;

 private:
  mutable std::mutex mu_;
  std::optional<ReplicaLoad> reported_;
  int32_t in_flight_ = 0;
  int32_t in_flight_at_poll_ = 0;
};

}  // namespace nexus::gateway
