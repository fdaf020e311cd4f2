// Fault injection on the path to the replicas, as Envoy's HTTP fault filter
// (envoy.filters.http.fault) does: for chaos tests, in production too.
//
//   abort=PCT:STATUS[@URL]   PCT percent of attempts get STATUS (400-599)
//                            without reaching the replica, as if it had
//                            answered it (a 5xx then counts as that
//                            replica's failure and is retried)
//   delay=PCT:MS[@URL]       PCT percent of attempts wait MS milliseconds
//                            before they are sent (a slow path)
// Without @URL a rule applies to every replica. PCT is 0-100 (decimals
// allowed). Each attempt draws each rule independently.
#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace nexus::gateway {

struct FaultRule {
  enum class Kind { Abort, Delay };
  Kind kind = Kind::Abort;
  double percent = 0;
  int status = 0;                    // Abort
  std::chrono::milliseconds delay{0};  // Delay
  std::string replica;               // normalized URL (http://host:port); "" = every replica
};

// Parses one --fault value; throws nexus::Error naming what is wrong.
FaultRule parse_fault(const std::string& spec);

struct FaultDecision {
  std::optional<int> abort_status;
  std::chrono::milliseconds delay{0};
};

// What the rules do to one attempt on `replica_url` (normalized).
FaultDecision decide_faults(const std::vector<FaultRule>& rules, const std::string& replica_url, std::mt19937_64& rng);

}  // namespace nexus::gateway
