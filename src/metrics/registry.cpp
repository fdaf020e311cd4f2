// Registry: registration (validation, families) and the text exposition
// format 0.0.4 renderer (metrics.h).
#include <atomic>
#include <memory>
#include <string>

#include "metrics/metrics.h"
#include "util/error.h"

namespace nexus::metrics {

struct Registry::Series {
  Labels labels;
  std::unique_ptr<Counter> counter;
  std::unique_ptr<IntCounter> int_counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
};

struct Registry::Family {
  std::string name, help;
  Kind kind;
  std::vector<double> bounds;  // histograms
  std::vector<std::unique_ptr<Series>> series;
};

namespace {

bool valid_name(const std::string& s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

const char* type_name(int kind) {
  // Kind order: Counter, IntCounter, Gauge, Histogram.
  static const char* const names[] = {"counter", "counter", "gauge", "histogram"};
  return names[kind];
}

// `{a="x",b="y"}` plus an optional trailing `le`; "" when there are none.
void append_labels(std::string& out, const Labels& labels, const std::string* le = nullptr) {
  if (labels.empty() && !le) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += escape_label_value(v);
    out += '"';
  }
  if (le) {
    if (!first) out += ',';
    out += "le=\"";
    out += *le;
    out += '"';
  }
  out += '}';
}

void append_sample(std::string& out, const std::string& name, const Labels& labels, const std::string& value,
                   const std::string* le = nullptr) {
  out += name;
  append_labels(out, labels, le);
  out += ' ';
  out += value;
  out += '\n';
}

}  // namespace

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Series& Registry::add(Kind kind, const std::string& name, const std::string& help, Labels labels,
                                const std::vector<double>* bounds) {
  if (!valid_name(name, true)) throw Error("metrics: invalid metric name '" + name + "'");
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& l = labels[i].first;
    if (!valid_name(l, false) || l.starts_with("__") || (kind == Kind::Histogram && l == "le"))
      throw Error("metrics: invalid label name '" + l + "' on " + name);
    for (size_t j = 0; j < i; ++j)
      if (labels[j].first == l) throw Error("metrics: label '" + l + "' twice on " + name);
  }
  // The series first (a histogram validates its bounds), so that a throw
  // leaves the registry unchanged.
  auto s = std::make_unique<Series>();
  s->labels = std::move(labels);
  switch (kind) {
    case Kind::Counter: s->counter = std::make_unique<Counter>(); break;
    case Kind::IntCounter: s->int_counter = std::make_unique<IntCounter>(); break;
    case Kind::Gauge: s->gauge = std::make_unique<Gauge>(); break;
    case Kind::Histogram: s->histogram = std::make_unique<Histogram>(*bounds); break;
  }
  std::lock_guard lock(mu_);
  Family* fam = nullptr;
  for (auto& f : families_)
    if (f->name == name) fam = f.get();
  if (fam) {
    if (fam->kind != kind || fam->help != help)
      throw Error("metrics: '" + name + "' registered again with another type or help");
    if (s->histogram && s->histogram->bounds() != fam->bounds)
      throw Error("metrics: histogram '" + name + "' registered again with other buckets");
    for (const auto& other : fam->series)
      if (other->labels == s->labels)
        throw Error("metrics: series '" + name + "' registered twice with the same labels");
  } else {
    families_.push_back(std::make_unique<Family>(
        Family{name, help, kind, s->histogram ? s->histogram->bounds() : std::vector<double>{}, {}}));
    fam = families_.back().get();
  }
  fam->series.push_back(std::move(s));
  return *fam->series.back();
}

Counter& Registry::counter(const std::string& name, const std::string& help, Labels labels) {
  return *add(Kind::Counter, name, help, std::move(labels), nullptr).counter;
}

IntCounter& Registry::int_counter(const std::string& name, const std::string& help, Labels labels) {
  return *add(Kind::IntCounter, name, help, std::move(labels), nullptr).int_counter;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, Labels labels) {
  return *add(Kind::Gauge, name, help, std::move(labels), nullptr).gauge;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                               Labels labels) {
  return *add(Kind::Histogram, name, help, std::move(labels), &bounds).histogram;
}

void Registry::set_gauges(std::initializer_list<std::pair<Gauge*, double>> values) noexcept {
  // Writer side of the sequence lock: make the count odd (waiting for another
  // writer to finish), store, make it even again.
  uint64_t seq = gauge_seq_.load(std::memory_order_relaxed);
  while ((seq & 1) != 0 || !gauge_seq_.compare_exchange_weak(seq, seq + 1, std::memory_order_relaxed)) {
    seq = gauge_seq_.load(std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_release);
  for (const auto& [gauge, v] : values) gauge->set(v);
  gauge_seq_.store(seq + 2, std::memory_order_release);
}

std::vector<double> Registry::gauge_snapshot() const {
  std::vector<double> values;
  for (;;) {
    values.clear();
    const uint64_t before = gauge_seq_.load(std::memory_order_acquire);
    if ((before & 1) != 0) continue;  // an update is being written
    for (const auto& f : families_)
      if (f->kind == Kind::Gauge)
        for (const auto& s : f->series) values.push_back(s->gauge->value());
    std::atomic_thread_fence(std::memory_order_acquire);
    if (gauge_seq_.load(std::memory_order_relaxed) == before) return values;
  }
}

std::string Registry::render() const {
  std::lock_guard lock(mu_);
  const std::vector<double> gauges = gauge_snapshot();
  size_t next_gauge = 0;
  std::string out;
  out.reserve(4096);
  for (const auto& f : families_) {
    out += "# HELP " + f->name + ' ' + escape_help(f->help) + '\n';
    out += "# TYPE " + f->name + ' ' + type_name(static_cast<int>(f->kind)) + '\n';
    for (const auto& s : f->series) {
      switch (f->kind) {
        case Kind::Counter: append_sample(out, f->name, s->labels, format_value(s->counter->value())); break;
        case Kind::IntCounter:
          append_sample(out, f->name, s->labels, std::to_string(s->int_counter->value()));
          break;
        case Kind::Gauge: append_sample(out, f->name, s->labels, format_value(gauges[next_gauge++])); break;
        case Kind::Histogram: {
          // One snapshot of the buckets, made cumulative; _count is the
          // +Inf bucket so the two always agree.
          const std::vector<uint64_t> counts = s->histogram->bucket_counts();
          const double sum = s->histogram->sum();
          uint64_t cumulative = 0;
          for (size_t i = 0; i < counts.size(); ++i) {
            cumulative += counts[i];
            const std::string le = i < f->bounds.size() ? format_value(f->bounds[i]) : "+Inf";
            append_sample(out, f->name + "_bucket", s->labels, std::to_string(cumulative), &le);
          }
          append_sample(out, f->name + "_sum", s->labels, format_value(sum));
          append_sample(out, f->name + "_count", s->labels, std::to_string(cumulative));
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace nexus::metrics
