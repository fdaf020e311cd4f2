#include "util/mem_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "util/error.h"

namespace nexus {
namespace {

constexpr uint64_t kChunk = 256;  // bytes per loop iteration: 4 x 64-byte loads

// Sums n bytes (a multiple of kChunk) at p as 64-bit words. Four independent
// accumulators keep several loads in flight.
uint64_t sum_words(const uint8_t* p, uint64_t n) {
#if defined(__AVX512F__)
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i < n; i += kChunk) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  // Reduced through memory: GCC 12's _mm512_reduce_add_epi64 trips -Wuninitialized.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t s = 0;
  for (uint64_t l : lanes) s += l;
  return s;
#elif defined(__AVX2__)
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i < n; i += kChunk) {
    for (uint64_t j = 0; j < kChunk; j += 128) {
      a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + j)));
      a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + j + 32)));
      a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + j + 64)));
      a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + j + 96)));
    }
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
#else
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (uint64_t i = 0; i < n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, sizeof w);
    a0 += w[0], a1 += w[1], a2 += w[2], a3 += w[3];
  }
  return a0 + a1 + a2 + a3;
#endif
}

const char* load_kind() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "scalar";
#endif
}

// Runs fn(thread_index) on n threads (the caller is thread 0) and returns the
// wall seconds from the moment all threads are ready to the last one's end.
template <class Fn>
double timed_parallel(int32_t n, Fn fn) {
  std::atomic<int32_t> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int32_t t = 1; t < n; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(t);
    });
  while (ready.load() < n - 1) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  fn(0);
  for (std::thread& th : threads) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Keeps the sums observable so the reads cannot be optimised away.
std::atomic<uint64_t> g_bandwidth_sink{0};

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(uint64_t buffer_bytes, int32_t n_threads) : n_threads_(n_threads) {
  if (n_threads < 1 || n_threads > 1024) throw Error("bandwidth: thread count must be in [1, 1024]");
  if (buffer_bytes > (uint64_t{1} << 40)) throw Error("bandwidth: buffer larger than 1 TiB");
  // Each thread's slice is a whole number of chunks.
  slice_ = std::max<uint64_t>(kChunk, buffer_bytes / n_threads / kChunk * kChunk);
  const uint64_t total = slice_ * static_cast<uint64_t>(n_threads);
  // 2 MiB aligned and advised MADV_HUGEPAGE, like the model's weights
  // (GgufFile maps them so): with 4 KiB pages the TLB misses and the
  // prefetchers stopping at page boundaries would make the ceiling lower than
  // what decode itself reaches.
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  const uint64_t alloc_bytes = (total + kHuge - 1) / kHuge * kHuge;
  buffer_.reset(static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc_bytes)));
  if (!buffer_) throw Error("bandwidth: cannot allocate " + std::to_string(total >> 20) + " MiB");
  uint8_t* base = buffer_.get();
  ::madvise(base, alloc_bytes, MADV_HUGEPAGE);  // advice only: ignored where THP is off
  // Each thread writes its own slice first, so on NUMA machines the pages
  // live next to the thread that reads them.
  timed_parallel(n_threads, [&](int32_t t) { std::memset(base + slice_ * t, t + 1, slice_); });
}

ReadBandwidth ReadBandwidthProbe::measure(int32_t runs) const {
  if (runs < 1) throw Error("bandwidth: runs must be >= 1");
  const uint64_t total = slice_ * static_cast<uint64_t>(n_threads_);
  const uint8_t* base = buffer_.get();
  ReadBandwidth r;
  r.buffer_bytes = total;
  r.n_threads = n_threads_;
  r.runs = runs;
  r.loads = load_kind();
  for (int32_t run = 0; run < runs; ++run) {
    const double s = timed_parallel(n_threads_, [&](int32_t t) {
      g_bandwidth_sink.fetch_add(sum_words(base + slice_ * t, slice_), std::memory_order_relaxed);
    });
    if (s > 0) r.bytes_per_s = std::max(r.bytes_per_s, static_cast<double>(total) / s);
  }
  return r;
}

ReadBandwidth measure_read_bandwidth(uint64_t buffer_bytes, int32_t n_threads, int32_t runs) {
  if (runs < 1) throw Error("bandwidth: runs must be >= 1");
  return ReadBandwidthProbe(buffer_bytes, n_threads).measure(runs);
}

}  // namespace nexus
