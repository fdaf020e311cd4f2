#include "kernels/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#define NEXUS_CPU_RELAX() _mm_pause()
#else
#define NEXUS_CPU_RELAX() std::this_thread::yield()
#endif

namespace nexus {
namespace {

// Range of part `index` of [0, n) split in `parts` nearly equal pieces.
std::pair<int64_t, int64_t> part_range(int64_t n, int32_t parts, int32_t index) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

uint64_t pack(int64_t front, int64_t back) {
  return static_cast<uint64_t>(front) | static_cast<uint64_t>(back) << 32;
}
int64_t front_of(uint64_t r) { return static_cast<int64_t>(r & 0xffffffffu); }
int64_t back_of(uint64_t r) { return static_cast<int64_t>(r >> 32); }

}  // namespace

ThreadPool::ThreadPool(int32_t n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  parts_ = std::vector<Part>(static_cast<size_t>(n_threads_));
  for (int32_t i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

// Own range from the front, in grain_ pieces; then the other ranges from
// the back. Claims are compare-exchanges on the range, so the owner and a
// thief never take the same item.
void ThreadPool::run_pieces(int32_t index) {
  std::atomic<uint64_t>& own = parts_[static_cast<size_t>(index)].range;
  for (uint64_t r = own.load(std::memory_order_relaxed);;) {
    const int64_t f = front_of(r), b = back_of(r);
    if (f >= b) break;
    const int64_t e = std::min(f + grain_, b);
    if (own.compare_exchange_weak(r, pack(e, b), std::memory_order_relaxed)) {
      fn_.call(fn_.obj, f, e);
      r = own.load(std::memory_order_relaxed);
    }
  }
  for (int32_t k = 1; k < n_threads_; ++k) {
    std::atomic<uint64_t>& other = parts_[static_cast<size_t>((index + k) % n_threads_)].range;
    for (uint64_t r = other.load(std::memory_order_relaxed);;) {
      const int64_t f = front_of(r), b = back_of(r);
      if (f >= b) break;
      const int64_t s = std::max(b - grain_, f);
      if (other.compare_exchange_weak(r, pack(f, s), std::memory_order_relaxed)) {
        fn_.call(fn_.obj, s, b);
        r = other.load(std::memory_order_relaxed);
      }
    }
  }
}

void ThreadPool::run_part(int32_t index) {
  try {
    run_pieces(index);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::run(int64_t n, RangeFn fn, int64_t grain) {
  if (n_threads_ == 1 || n <= 1 || n >= (int64_t{1} << 31)) {  // wider ranges do not pack into Part
    if (n > 0) fn.call(fn.obj, 0, n);
    return;
  }
  fn_ = fn;
  // parallel_for: one piece per thread's range, so a range is run whole, by
  // its thread or, if that thread has not started yet, by another.
  const int64_t part = (n + n_threads_ - 1) / n_threads_;
  grain_ = grain > 0 ? grain : part;
  for (int32_t i = 0; i < n_threads_; ++i) {
    auto [b, e] = part_range(n, n_threads_, i);
    parts_[static_cast<size_t>(i)].range.store(pack(b, e), std::memory_order_relaxed);
  }
  error_ = nullptr;
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  join_.store(join_tag(gen), std::memory_order_relaxed);  // open, nobody joined
  {
    // The bump happens under the mutex so a worker about to sleep sees it.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(gen, std::memory_order_release);
  }
  cv_.notify_all();
  // The caller takes its range, then every piece still unclaimed: it never
  // waits for a worker that has not started (descheduled on a busy machine).
  run_part(0);
  // All pieces are claimed; close the call and wait for the workers that
  // joined it to finish theirs. A worker that comes later sees it closed.
  join_.fetch_or(kClosed, std::memory_order_acq_rel);
  while ((join_.load(std::memory_order_acquire) & kJoinedMask) != 0) NEXUS_CPU_RELAX();
  if (error_) std::rethrow_exception(error_);
}

bool ThreadPool::try_join(uint64_t gen) {
  uint64_t j = join_.load(std::memory_order_acquire);
  while ((j & ~(kClosed | kJoinedMask)) == join_tag(gen) && (j & kClosed) == 0) {
    if (join_.compare_exchange_weak(j, j + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void ThreadPool::worker(int32_t index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin first: the next parallel_for of a step is usually microseconds away.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    uint64_t gen;
    int spins = 0;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen && !stop_.load(std::memory_order_relaxed)) {
      NEXUS_CPU_RELAX();
      if (++spins % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        spins = 0;
      }
    }
    if (stop_.load()) return;
    seen = gen;
    if (!try_join(gen)) continue;  // the caller already finished this call
    run_part(index);
    join_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace nexus
