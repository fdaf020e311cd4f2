// What the operating system says about memory.
#pragma once

#include <cstdint>

namespace nexus {

// MemAvailable of /proc/meminfo (bytes): what can be allocated without
// swapping. 0 when unknown (not Linux, unreadable).
int64_t available_ram_bytes();

}  // namespace nexus
