// LengthDistribution: how many tokens a generated prompt or output has.
//
// Spec strings (the --prompt-tokens / --max-tokens flags):
//   "128"               fixed
//   "uniform:64:256"    integer uniform on [64, 256], both ends included
//   "normal:128:32"     normal(mean 128, sd 32), rounded, clamped to >= 1
// Every sample is >= 1. Bad specs throw nexus::Error naming the spec.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace nexus::loadgen {

class LengthDistribution {
 public:
  enum class Kind { Fixed, Uniform, Normal };

  static LengthDistribution parse(const std::string& spec);  // throws nexus::Error
  static LengthDistribution fixed(int32_t n);

  int32_t sample(std::mt19937_64& rng) const;
  double mean() const;  // of the spec (before clamping), for reports
  Kind kind() const { return kind_; }
  const std::string& spec() const { return spec_; }

 private:
  Kind kind_ = Kind::Fixed;
  double a_ = 1, b_ = 1;  // fixed: a; uniform: [a, b]; normal: mean a, sd b
  std::string spec_ = "1";
};

}  // namespace nexus::loadgen
