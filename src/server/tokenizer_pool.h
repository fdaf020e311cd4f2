// TokenizerPool: a few worker threads that tokenize (and render) large
// inputs off the I/O threads, so an I/O thread never runs long for one
// client (issue 26). HttpSession hands it a request whose body is at least
// kOffThreadBytes (the whole dispatch: JSON parse, chat template render,
// tokenize); RealtimeSession every message of at least that many bytes
// (its JSON parse) and the prompt of a response.create whose pending input
// is at least that many bytes. Smaller inputs stay on the I/O thread, where
// they cost less than the hand-off.
//
// The workers run at nice +10 (Linux: per thread): when the cores are
// short, the engine thread and the I/O threads that stream tokens go first
// and a bulk input waits. Measured with tests/test_adversarial_realtime (4
// clients flooding 900 KB input.append frames while 8 streams run, 2
// cores): the streams' ITL p99 during the flood 3.2-5.0 ms before (median
// of 5: 4.4), 2.8-3.3 ms with the parse on the workers at nice +10
// (median 3.0), and the streams got 20-70% more tokens out meanwhile. Such a
// flood no longer reaches the workers: RealtimeSession refuses an
// input.append too large for the context from realtime_input_probe.h's
// measure, without the parse (230 ms of the workers' CPU in that test).
//
// post() queues a function that runs on a worker; the caller posts its
// result back to its own strand (through the server's PostGate, as engine
// events are). stop() discards what is queued and joins the workers; it is
// idempotent and runs before the io_context goes away (HttpServer::stop()).
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nexus::server {

class TokenizerPool {
 public:
  // Inputs of at least this many bytes are tokenized on the pool.
  static constexpr size_t kOffThreadBytes = 16 << 10;

  explicit TokenizerPool(int threads);  // at least 1
  ~TokenizerPool();                     // stop()
  TokenizerPool(const TokenizerPool&) = delete;
  TokenizerPool& operator=(const TokenizerPool&) = delete;

  // false once stopped (`fn` is dropped then).
  bool post(std::function<void()> fn);
  void stop();
  size_t queued() const;  // waiting, not yet running

 private:
  void run();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace nexus::server
