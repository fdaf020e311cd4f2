// Parsing of memory-size command-line arguments.
#pragma once

#include <cstdint>
#include <string>

namespace nexus::cli {

// "0" -> 0 (the default); "1048576", "512K", "256M", "2G" (powers of 1024)
// -> bytes; "0.25" (a number in (0, 1)) -> that fraction of the available
// RAM. Throws UsageError naming `flag` on anything else, nexus::Error when
// a fraction is given and the available RAM is unknown.
int64_t parse_memory_arg(const std::string& text, const char* flag);

}  // namespace nexus::cli
