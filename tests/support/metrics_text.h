// A parser for the Prometheus text exposition format 0.0.4 (as much as the
// server tests need: samples with labels; comments skipped), and checks of
// the histogram invariants. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace nexus::test {

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

// Parses every sample line; a malformed line adds a test failure and is skipped.
inline std::vector<MetricSample> parse_metrics_text(const std::string& text) {
  std::vector<MetricSample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    MetricSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
    bool ok = !s.name.empty() && i < line.size();
    if (ok && line[i] == '{') {
      ++i;
      while (ok && i < line.size() && line[i] != '}') {
        const size_t eq = line.find("=\"", i);
        if (eq == std::string::npos) { ok = false; break; }
        const std::string key = line.substr(i, eq - i);
        std::string value;
        for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
        }
        if (i >= line.size()) { ok = false; break; }
        s.labels[key] = value;
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
      }
      ok = ok && i < line.size();
      ++i;  // '}'
    }
    if (!ok || i >= line.size() || line[i] != ' ') {
      ADD_FAILURE() << "malformed sample line: " << line;
      continue;
    }
    const std::string v = line.substr(i + 1);
    if (v == "+Inf") s.value = std::numeric_limits<double>::infinity();
    else if (v == "-Inf") s.value = -std::numeric_limits<double>::infinity();
    else if (v == "NaN") s.value = std::nan("");
    else {
      try {
        size_t used = 0;
        s.value = std::stod(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        ADD_FAILURE() << "malformed value in: " << line;
        continue;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

// The value of the sample `name` with exactly `labels`; nullopt when absent.
inline std::optional<double> metric_value(const std::vector<MetricSample>& samples, const std::string& name,
                                          const std::map<std::string, std::string>& labels = {}) {
  for (const MetricSample& s : samples)
    if (s.name == name && s.labels == labels) return s.value;
  return std::nullopt;
}

// The (le, cumulative count) buckets of histogram `name` (unlabelled series),
// in rendering order, +Inf last.
inline std::vector<std::pair<double, double>> histogram_buckets(const std::vector<MetricSample>& samples,
                                                                const std::string& name) {
  std::vector<std::pair<double, double>> out;
  for (const MetricSample& s : samples) {
    if (s.name != name + "_bucket" || !s.labels.count("le")) continue;
    const std::string& le = s.labels.at("le");
    out.emplace_back(le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le), s.value);
  }
  return out;
}

// Histogram invariants: bounds increasing, counts cumulative (non-decreasing),
// the last bucket +Inf and equal to _count.
inline void expect_valid_histogram(const std::vector<MetricSample>& samples, const std::string& name) {
  const auto b = histogram_buckets(samples, name);
  ASSERT_GE(b.size(), 2u) << name;
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_GT(b[i].first, b[i - 1].first) << name << " bucket " << i;
    EXPECT_GE(b[i].second, b[i - 1].second) << name << " bucket le=" << b[i].first;
  }
  EXPECT_TRUE(std::isinf(b.back().first)) << name;
  EXPECT_EQ(metric_value(samples, name + "_count"), b.back().second) << name;
  EXPECT_TRUE(metric_value(samples, name + "_sum").has_value()) << name;
}

}  // namespace nexus::test
