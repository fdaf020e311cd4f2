#include "loadgen/distribution.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace nexus::loadgen {

namespace {

constexpr double kMaxTokens = 1 << 24;  // far above any context; keeps casts defined

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    parts.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return parts;
    start = p + 1;
  }
}

// A whole decimal number (no sign tricks, no trailing junk).
double number(const std::string& text, const std::string& spec, bool integer) {
  if (text.empty()) throw Error(fmt::format("length spec '{}': empty number", spec));
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(v)) {
    throw Error(fmt::format("length spec '{}': '{}' is not a number", spec, text));
  }
  if (integer && v != std::floor(v)) throw Error(fmt::format("length spec '{}': '{}' is not an integer", spec, text));
  if (v < 0 || v > kMaxTokens) throw Error(fmt::format("length spec '{}': {} is out of range", spec, text));
  return v;
}

}  // namespace

LengthDistribution LengthDistribution::fixed(int32_t n) {
  if (n < 1) throw Error(fmt::format("length {} must be >= 1", n));
  LengthDistribution d;
  d.kind_ = Kind::Fixed;
  d.a_ = d.b_ = n;
  d.spec_ = std::to_string(n);
  return d;
}

LengthDistribution LengthDistribution::parse(const std::string& spec) {
  const std::vector<std::string> p = split(spec, ':');
  LengthDistribution d;
  d.spec_ = spec;
  if (p.size() == 1) {
    d.kind_ = Kind::Fixed;
    d.a_ = d.b_ = number(p[0], spec, true);
    if (d.a_ < 1) throw Error(fmt::format("length spec '{}': must be >= 1", spec));
  } else if (p[0] == "uniform" && p.size() == 3) {
    d.kind_ = Kind::Uniform;
    d.a_ = number(p[1], spec, true);
    d.b_ = number(p[2], spec, true);
    if (d.a_ < 1 || d.b_ < d.a_) throw Error(fmt::format("length spec '{}': needs 1 <= min <= max", spec));
  } else if (p[0] == "normal" && p.size() == 3) {
    d.kind_ = Kind::Normal;
    d.a_ = number(p[1], spec, false);
    d.b_ = number(p[2], spec, false);
    if (d.a_ < 1) throw Error(fmt::format("length spec '{}': mean must be >= 1", spec));
  } else {
    throw Error(fmt::format("length spec '{}': expected N, uniform:MIN:MAX or normal:MEAN:SD", spec));
  }
  return d;
}

int32_t LengthDistribution::sample(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::Fixed: return static_cast<int32_t>(a_);
    case Kind::Uniform:
      return static_cast<int32_t>(std::uniform_int_distribution<int64_t>(static_cast<int64_t>(a_),
                                                                         static_cast<int64_t>(b_))(rng));
    case Kind::Normal: {
      if (b_ == 0) return static_cast<int32_t>(std::lround(a_));
      const double v = std::round(std::normal_distribution<double>(a_, b_)(rng));
      return static_cast<int32_t>(std::clamp(v, 1.0, kMaxTokens));
    }
  }
  return 1;
}

double LengthDistribution::mean() const { return kind_ == Kind::Uniform ? (a_ + b_) / 2 : a_; }

}  // namespace nexus::loadgen
