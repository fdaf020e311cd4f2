// A small, dependency-free metrics library rendering the Prometheus text
// exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
// Types:
//   Counter / IntCounter   monotonic total (double / int64)
//   Gauge                  a value that goes up and down (double)
//   Histogram              observations counted in fixed buckets; rendered as
//                          cumulative `NAME_bucket{le="B"}` series (le = upper
//                          bound, inclusive, ending with le="+Inf"), `NAME_sum`
//                          and `NAME_count`
// Each series may carry one fixed label set (e.g. {finish_reason="stop"});
// series of the same name form one metric family (one # HELP / # TYPE).
//
// Threading: a Registry hands out series by reference (stable addresses).
// Updating a series (inc/set/observe) is lock-free and allocation-free: a few
// relaxed atomic operations, safe from any thread. render() may run
// concurrently on any thread; it takes the registry's mutex, which only
// registration and other renders contend for. Because updates are relaxed and
// not grouped, a histogram rendered during observe() calls may be off by the
// in-flight observations between its buckets and its _sum; its buckets,
// _count and the +Inf bucket are always consistent with each other (_count
// is the +Inf bucket). Each scrape is a snapshot at most a few observations
// stale, which Prometheus tolerates (rate() and histogram_quantile() work on
// differences over many scrapes). Gauges that must agree with each other
// (parts of one total) are set with Registry::set_gauges(), which a render
// sees whole or not at all.
//
// Errors: invalid names, label names, bucket bounds or a duplicate series
// throw nexus::Error at registration (a programming error, caught in tests).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace nexus::metrics {

// One series' labels: (name, value) pairs, rendered in this order. Values
// may be any UTF-8 text (escaped when rendered).
using Labels = std::vector<std::pair<std::string, std::string>>;

template <class T>
class BasicCounter {
 public:
  // `v` must be >= 0 (a counter only goes up); negative values are ignored.
  void inc(T v = 1) noexcept {
    if (v > 0) value_.fetch_add(v, std::memory_order_relaxed);
  }
  // Mirrors a total kept elsewhere: raises the counter to `total`, never
  // lowers it (so the series stays monotonic even if called out of order).
  void advance_to(T total) noexcept {
    T cur = value_.load(std::memory_order_relaxed);
    while (total > cur && !value_.compare_exchange_weak(cur, total, std::memory_order_relaxed)) {
    }
  }
  T value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<T> value_{0};
};

using Counter = BasicCounter<double>;
using IntCounter = BasicCounter<int64_t>;

class Gauge {
 public:
  void set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(double v) noexcept { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: finite, strictly increasing bucket upper bounds; the +Inf
  // bucket is implicit (a trailing +Inf is accepted and dropped). Throws
  // nexus::Error otherwise.
  explicit Histogram(std::vector<double> bounds);

  // Counts `v` in the first bucket with v <= bound (else +Inf) and adds it to
  // the sum. NaN is ignored.
  void observe(double v) noexcept;

  const std::vector<double>& bounds() const { return bounds_; }
  // Per-bucket (not cumulative) counts, bounds().size() + 1 of them (the last
  // is +Inf), and the sum: a relaxed snapshot (see the header comment).
  std::vector<uint64_t> bucket_counts() const;
  double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const;  // the sum of bucket_counts()

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
};

// Bucket bounds for latencies in seconds, 0.1 ms to 10 s in a 1-2-5 series:
// 0.0001, 0.0002, 0.0005, 0.001, ..., 2, 5, 10 (16 bounds, then +Inf).
std::vector<double> latency_buckets_seconds();
// start, start*factor, ... (`count` bounds), e.g. (1, 2, 11) -> 1, 2, 4, ..., 1024.
std::vector<double> exponential_buckets(double start, double factor, int count);

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers a series and returns it; the reference stays valid for the
  // registry's lifetime. A name may be registered again with other labels
  // (same type and help, for histograms the same bounds); the exact same
  // name + labels twice throws. Names follow [a-zA-Z_:][a-zA-Z0-9_:]*, label
  // names [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__", not "le" for
  // histograms).
  Counter& counter(const std::string& name, const std::string& help, Labels labels = {});
  IntCounter& int_counter(const std::string& name, const std::string& help, Labels labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, Labels labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                       Labels labels = {});

  // Sets several gauges of this registry as one update: a concurrent
  // render() shows all of the old values or all of the new ones, never a mix
  // (a sequence lock: the writer never waits for a render; a render retries
  // while an update is in flight, which takes nanoseconds). Concurrent
  // set_gauges() calls are serialized by spinning. Gauge::set() outside this
  // call stays allowed, but is not grouped with anything.
  void set_gauges(std::initializer_list<std::pair<Gauge*, double>> values) noexcept;

  // The text exposition format 0.0.4 of every family, in registration order.
  std::string render() const;

 private:
  enum class Kind { Counter, IntCounter, Gauge, Histogram };
  struct Series;
  struct Family;
  Series& add(Kind kind, const std::string& name, const std::string& help, Labels labels,
              const std::vector<double>* bounds);

  // Every gauge's value, read consistently with set_gauges() (under mu_).
  std::vector<double> gauge_snapshot() const;

  mutable std::mutex mu_;                         // registration and render only
  std::atomic<uint64_t> gauge_seq_{0};            // odd while set_gauges() writes
  std::vector<std::unique_ptr<Family>> families_;  // stable addresses
};

// Renders a sample value as Prometheus expects: "+Inf", "-Inf", "NaN", or the
// shortest decimal that reads back to `v` (integers without exponent).
std::string format_value(double v);
// Escapes a label value: backslash, double quote and newline.
std::string escape_label_value(const std::string& v);
// Escapes HELP text: backslash and newline.
std::string escape_help(const std::string& v);

}  // namespace nexus::metrics
