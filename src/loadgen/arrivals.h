// PoissonArrivals: start times of an open-loop load (a Poisson process).
//
// Requests arrive independently at `rate` per second on average, so the gaps
// between consecutive arrivals are exponential with mean 1/rate (the usual
// model of many independent users; as in vLLM's benchmark_serving
// --request-rate). Arrivals do not wait for earlier requests to finish.
#pragma once

#include <cstdint>
#include <random>

namespace nexus::loadgen {

class PoissonArrivals {
 public:
  PoissonArrivals(double rate_per_s, uint64_t seed);  // rate > 0, else nexus::Error

  // Seconds from the previous arrival (or the start) to the next one.
  double next_gap_s();
  // Seconds from the start to the next arrival (running sum of the gaps).
  double next_arrival_s() { return t_ += next_gap_s(); }

 private:
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  double t_ = 0;
};

}  // namespace nexus::loadgen
