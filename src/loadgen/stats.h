// Summary statistics of a latency sample (milliseconds).
//
// Percentiles use linear interpolation between closest ranks (the
// "type 7" estimator of Hyndman & Fan 1996, numpy.percentile's default):
// for sorted x[0..n-1], p in [0, 100], h = (n-1)*p/100, the result is
// x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)]).
#pragma once

#include <cstddef>
#include <vector>

namespace nexus::loadgen {

// `sorted` must be ascending and non-empty; p is clamped to [0, 100].
double percentile_sorted(const std::vector<double>& sorted, double p);

struct Summary {
  size_t count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0;  // all 0 when count == 0
};

Summary summarize(std::vector<double> values);

}  // namespace nexus::loadgen
