// The JSON form of a BenchReport (schema "nexus-bench/1", documented field by
// field in docs/bench.md). Optional values are null when absent; turns are
// 1-based.
#pragma once

#include <nlohmann/json.hpp>

#include "loadgen/report.h"

namespace nexus::loadgen {

nlohmann::json summary_json(const Summary& s);
nlohmann::json report_json(const BenchReport& r);

}  // namespace nexus::loadgen
