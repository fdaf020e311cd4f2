// An SVG chart of latency against load for a sweep: three panels (TTFT, ITL,
// E2E), each with the p50, p90 and p99 lines over the phases (x = load
// level, evenly spaced in phase order; y = ms from 0). Plain SVG 1.1 text,
// no scripts or external resources, so any browser or image viewer opens it.
#pragma once

#include <string>

#include "loadgen/report.h"

namespace nexus::loadgen {

std::string sweep_svg(const BenchReport& r);

// The smallest "nice" step (1, 2 or 5 x 10^k) giving at most `max_ticks`
// ticks over [0, top] (for tests; top > 0).
double nice_tick_step(double top, int max_ticks);

}  // namespace nexus::loadgen
