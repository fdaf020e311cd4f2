// DRAM read bandwidth, measured the way a decode step reads weights: every
// thread streams through its own contiguous slice of a buffer far larger than
// the caches, summing 64-bit words with the widest vector loads the build has
// (AVX-512, AVX2 in the x86-64-v3 baseline, or plain 64-bit loads; any of them
// outruns DRAM), so the loop is bound by memory, not by arithmetic. This is the ceiling for memory-bound decode:
// tokens/s <= bandwidth / weight bytes read per token.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace nexus {

struct ReadBandwidth {
  double bytes_per_s = 0;     // best run: buffer bytes / wall seconds
  uint64_t buffer_bytes = 0;  // bytes read per run
  int32_t n_threads = 0;
  int32_t runs = 0;
  const char* loads = "";     // "avx512", "avx2" or "scalar"
};

// The buffer allocated (2 MiB pages where the kernel gives them, like the
// model's weights) and written once, for measuring several times: on a VM
// whose bandwidth moves with its neighbours' load, a bound is only as good as
// a reading taken next to the run it bounds.
// buffer_bytes: as for measure_read_bandwidth(); n_threads >= 1 readers
// including the caller. Throws nexus::Error when the buffer cannot be
// allocated or an argument is out of range.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(uint64_t buffer_bytes, int32_t n_threads);
  // The best of `runs` (>= 1, else nexus::Error) full reads of the buffer.
  ReadBandwidth measure(int32_t runs) const;

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, FreeDeleter> buffer_;
  uint64_t slice_ = 0;  // bytes per thread
  int32_t n_threads_ = 0;
};

// One probe, measured once. buffer_bytes: size of the buffer read (>= 1 GiB to defeat the caches;
// smaller values are allowed for tests and then measure caches). n_threads
// >= 1 readers including the caller; runs >= 1 (the best one is kept).
// Throws nexus::Error when the buffer cannot be allocated or an argument is
// out of range.
ReadBandwidth measure_read_bandwidth(uint64_t buffer_bytes, int32_t n_threads, int32_t runs);

}  // namespace nexus
