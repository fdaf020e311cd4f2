// ThreadPool: a fixed set of worker threads for data-parallel kernels.
//
// parallel_for(n, fn) splits [0, n) into one contiguous range per thread and
// runs fn(begin, end) on each, the calling thread taking the first range;
// it returns when all ranges are done. Not re-entrant: one parallel_for at a
// time per pool (the model calls it from one thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
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

  // Runs fn(begin, end) over [0, n) split in size() parts. Ranges are empty
  // for threads beyond n. Exceptions thrown by fn are rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int32_t index);

  int32_t n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  uint64_t generation_ = 0;
  int32_t pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace nexus
