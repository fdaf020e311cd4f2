#include "loadgen/arrivals.h"

#include <cmath>

#include <fmt/format.h>

#include "util/error.h"

namespace nexus::loadgen {

PoissonArrivals::PoissonArrivals(double rate_per_s, uint64_t seed) : rng_(seed) {
  if (!(rate_per_s > 0) || !std::isfinite(rate_per_s)) {
    throw Error(fmt::format("request rate must be a positive number of requests/s (got {})", rate_per_s));
  }
  gap_ = std::exponential_distribution<double>(rate_per_s);
}

double PoissonArrivals::next_gap_s() { return gap_(rng_); }

}  // namespace nexus::loadgen
