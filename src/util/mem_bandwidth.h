// DRAM read bandwidth, measured the way a decode step reads weights: every
// thread streams through its own contiguous slice of a buffer far larger than
// the caches, summing 64-bit words with the widest vector loads the build has
// (AVX-512, AVX2 in the x86-64-v3 baseline, or plain 64-bit loads; any of them
// outruns DRAM), so the loop is bound by memory, not by arithmetic. This is the ceiling for memory-bound decode:
// tokens/s <= bandwidth / weight bytes read per token.
#pragma once

#include <cstdint>

namespace nexus {

struct ReadBandwidth {
  double bytes_per_s = 0;     // best run: buffer bytes / wall seconds
  uint64_t buffer_bytes = 0;  // bytes read per run
  int32_t n_threads = 0;
  int32_t runs = 0;
  const char* loads = "";     // "avx512", "avx2" or "scalar"
};

// buffer_bytes: size of the buffer read (>= 1 GiB to defeat the caches;
// smaller values are allowed for tests and then measure caches). n_threads
// >= 1 readers including the caller; runs >= 1 (the best one is kept).
// Throws nexus::Error when the buffer cannot be allocated or an argument is
// out of range.
ReadBandwidth measure_read_bandwidth(uint64_t buffer_bytes, int32_t n_threads, int32_t runs);

}  // namespace nexus
