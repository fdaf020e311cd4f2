// ThreadPool: a fixed set of worker threads for data-parallel kernels.
//
// parallel_for(n, fn) splits [0, n) into one contiguous range per thread and
// runs fn(begin, end) on each, the calling thread taking the first range
// (and any range no worker has started);
// it returns when all ranges are done. parallel_for_stealing(n, grain, fn)
// starts from the same ranges but runs each in grain-sized pieces, and a
// thread done with its own range takes pieces from the far end of the
// others' (so both cores finish together when one of them is slowed). Not re-entrant: one parallel_for at a
// time per pool (the model calls it from one thread).
//
// Latency: a decode step issues dozens of parallel_for calls a few
// microseconds apart, so idle workers spin on an atomic for a while
// (kSpinMicros) before sleeping on a condition variable. The caller never
// waits for a worker that has not started: it runs every range no worker
// has claimed (a worker descheduled on a busy machine would otherwise stall
// each call by a scheduler time slice), and then waits only for pieces in
// progress. No allocation per call: fn is passed by reference, never copied
// into a std::function.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace nexus {

class ThreadPool {
 public:
  // n_threads includes the caller; 0 = std::thread::hardware_concurrency().
  explicit ThreadPool(int32_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t size() const { return n_threads_; }

  // Runs fn(begin, end) over [0, n) split in size() nearly equal parts, each
  // run whole by one thread (not necessarily the same one from call to
  // call). Ranges are empty for threads beyond n; n >= 2^31 runs on the
  // caller alone. An exception thrown by fn is rethrown here (the first one,
  // after every range has finished).
  template <class Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n, RangeFn{const_cast<void*>(static_cast<const void*>(&fn)),
                   [](void* f, int64_t b, int64_t e) { (*static_cast<F*>(f))(b, e); }});
  }

  // As parallel_for, but fn sees [0, n) in pieces of at most `grain` items:
  // each thread works through its own range from the front, then takes
  // pieces from the back of a range still in progress. Which thread runs
  // which piece varies from call to call, so fn's result for an item must
  // not depend on the piece it is in. n >= 2^31 runs on the caller alone.
  template <class Fn>
  void parallel_for_stealing(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n, RangeFn{const_cast<void*>(static_cast<const void*>(&fn)),
                   [](void* f, int64_t b, int64_t e) { (*static_cast<F*>(f))(b, e); }},
        grain);
  }

  // How long an idle worker spins before it sleeps.
  static constexpr int kSpinMicros = 200;

 private:
  struct RangeFn {
    void* obj;
    void (*call)(void*, int64_t, int64_t);
  };
  // One thread's range [front, back) of a parallel_for_stealing, packed as
  // front | back << 32 so a claim from either end is one compare-exchange.
  struct alignas(64) Part {
    std::atomic<uint64_t> range{0};
  };
  void run(int64_t n, RangeFn fn, int64_t grain = 0);
  void run_part(int32_t index);
  void run_pieces(int32_t index);
  bool try_join(uint64_t gen);
  void worker(int32_t index);

  // join_ = generation << 32 | kClosed? | workers inside the call. A worker
  // joins a call only while it is open; the caller closes it once every
  // piece is claimed and waits for the joined count to drop to zero.
  static constexpr uint64_t kClosed = uint64_t{1} << 31;
  static constexpr uint64_t kJoinedMask = kClosed - 1;
  static uint64_t join_tag(uint64_t gen) { return gen << 32; }  // the low 32 bits of gen (the rest shift out)

  int32_t n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  RangeFn fn_{};
  int64_t grain_ = 0;  // piece size; parallel_for: the largest thread range
  std::vector<Part> parts_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> join_{0};
  std::atomic<bool> stop_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace nexus
