#include "server/tokenizer_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace nexus::server {

TokenizerPool::TokenizerPool(int threads) {
  const int n = std::max(1, threads);
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

TokenizerPool::~TokenizerPool() { stop(); }

bool TokenizerPool::post(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return false;
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
  return true;
}

void TokenizerPool::stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    if (stopped_ && threads_.empty()) return;
    stopped_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  // `dropped` (and what its functions hold) goes here, outside the lock.
}

size_t TokenizerPool::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void TokenizerPool::run() {
  // Below the engine and I/O threads (header). Raising one's own nice
  // value needs no privilege; a failure leaves the default priority.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
      if (stopped_) return;
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace nexus::server
