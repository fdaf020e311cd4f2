// The human-readable form of a BenchReport: per phase a summary and a
// latency table (mean, min, p50, p90, p99, max in ms), TTFT per turn for
// multi-turn sessions, and a one-line-per-level table for sweeps.
#pragma once

#include <string>

#include "loadgen/report.h"

namespace nexus::loadgen {

std::string report_text(const BenchReport& r);

}  // namespace nexus::loadgen
