#include "loadgen/runner.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "loadgen/arrivals.h"
#include "util/error.h"

namespace nexus::loadgen {

namespace {

class PhaseState {
 public:
  PhaseState(const Workload& w, const LoadOptions& load, const RecordCallback& cb)
      : workload_(w), load_(load), cb_(cb) {}

  // Runs session `index` (phase-relative) on `t`, turn after turn.
  void run_session(Transport& t, uint64_t index, Clock::time_point scheduled) {
    Conversation conv(workload_, load_.first_session + index);
    for (int32_t k = 0; k < conv.turns(); ++k) {
      RequestRecord rec;
      rec.session = index;
      rec.turn = k;
      const RequestSpec spec = conv.request(k);
      rec.max_tokens = spec.max_tokens;
      rec.scheduled = k == 0 ? scheduled : Clock::now();
      rec.result = t.run_request(spec);
      const bool ok = rec.result.ok();
      if (ok) conv.add_reply(rec.result.text);
      add(std::move(rec));
      if (!ok) break;
    }
  }

  void add(RequestRecord rec) {
    std::lock_guard lock(mu_);
    if (cb_) cb_(rec);
    run_.records.push_back(std::move(rec));
  }

  void add_connections(uint64_t n) {
    std::lock_guard lock(mu_);
    run_.connections_opened += n;
  }

  PhaseRun finish(Clock::time_point start, uint64_t sessions, int32_t workers) {
    run_.start = start;
    run_.end = start;
    for (const RequestRecord& r : run_.records) run_.end = std::max(run_.end, r.result.end);
    run_.sessions = sessions;
    run_.workers = workers;
    return std::move(run_);
  }

 private:
  const Workload& workload_;
  const LoadOptions& load_;
  const RecordCallback& cb_;
  std::mutex mu_;
  PhaseRun run_;
};

bool past(const LoadOptions& load, Clock::time_point start, Clock::time_point t) {
  return load.duration_s && t >= start + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(*load.duration_s));
}

PhaseRun closed_loop(const Workload& w, const TransportFactory& make, const LoadOptions& load,
                     const RecordCallback& cb) {
  PhaseState state(w, load, cb);
  std::atomic<uint64_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int32_t i = 0; i < load.concurrency; ++i) {
    threads.emplace_back([&] {
      std::unique_ptr<Transport> t = make();
      for (;;) {
        const auto now = Clock::now();
        if (past(load, start, now)) break;
        const uint64_t idx = next.fetch_add(1);
        if (load.sessions && idx >= *load.sessions) break;
        state.run_session(*t, idx, now);
      }
      state.add_connections(t->connections_opened());
    });
  }
  for (std::thread& th : threads) th.join();
  // A fetch_add past the session count started nothing.
  const uint64_t started = load.sessions ? std::min(next.load(), *load.sessions) : next.load();
  return state.finish(start, started, load.concurrency);
}

PhaseRun open_loop(const Workload& w, const TransportFactory& make, const LoadOptions& load,
                   const RecordCallback& cb) {
  PhaseState state(w, load, cb);
  struct Job {
    uint64_t index;
    Clock::time_point due;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> queue;
  bool closing = false;
  int32_t idle = 0;
  std::vector<std::thread> threads;
  auto worker = [&] {
    std::unique_ptr<Transport> t = make();
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mu);
        ++idle;
        cv.wait(lock, [&] { return closing || !queue.empty(); });
        --idle;
        if (queue.empty()) break;
        job = queue.front();
        queue.pop_front();
      }
      state.run_session(*t, job.index, job.due);
    }
    state.add_connections(t->connections_opened());
  };

  PoissonArrivals arrivals(load.rate, load.seed);
  const auto start = Clock::now();
  uint64_t started = 0;
  for (;; ++started) {
    if (load.sessions && started >= *load.sessions) break;
    const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(arrivals.next_arrival_s()));
    if (past(load, start, due)) break;
    std::this_thread::sleep_until(due);
    std::lock_guard lock(mu);
    queue.push_back(Job{started, due});
    // A new worker when none is free (the queue is drained by idle ones).
    if (static_cast<size_t>(idle) < queue.size() && threads.size() < static_cast<size_t>(load.max_inflight)) {
      threads.emplace_back(worker);
    }
    cv.notify_one();
  }
  {
    std::lock_guard lock(mu);
    closing = true;
  }
  cv.notify_all();
  for (std::thread& th : threads) th.join();
  return state.finish(start, started, static_cast<int32_t>(threads.size()));
}

}  // namespace

PhaseRun run_phase(const Workload& workload, const TransportFactory& transports, const LoadOptions& load,
                   const RecordCallback& on_record) {
  if (!load.sessions && !load.duration_s) throw Error("a phase needs a request count or a duration");
  if (load.duration_s && !(*load.duration_s > 0)) throw Error("--duration must be > 0");
  if (load.rate > 0) {
    if (load.max_inflight < 1) throw Error("--max-inflight must be >= 1");
    return open_loop(workload, transports, load, on_record);
  }
  if (load.concurrency < 1) throw Error("--concurrency must be >= 1");
  return closed_loop(workload, transports, load, on_record);
}

}  // namespace nexus::loadgen
