// token_logprobs against a direct float64 log-softmax.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sampling/logprobs.h"

namespace nexus {
namespace {

std::vector<double> log_softmax(const std::vector<float>& l) {
  double max = -INFINITY, sum = 0;
  for (float x : l) max = std::max(max, static_cast<double>(x));
  for (float x : l) sum += std::exp(x - max);
  std::vector<double> out;
  for (float x : l) out.push_back(x - max - std::log(sum));
  return out;
}

TEST(Logprobs, ChosenAndTopEqualTheLogSoftmax) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> logits(32000);
  for (float& x : logits) x = nd(rng);
  const std::vector<double> ref = log_softmax(logits);
  const Logprobs lp = token_logprobs(logits, 1234, 20);
  EXPECT_EQ(lp.chosen.id, 1234);
  EXPECT_NEAR(lp.chosen.logprob, ref[1234], 1e-5 * std::abs(ref[1234]));
  ASSERT_EQ(lp.top.size(), 20u);
  // The 20 largest, best first, each its own log-softmax.
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(lp.top[i].id, order[i]) << i;
    EXPECT_NEAR(lp.top[i].logprob, ref[order[i]], 1e-5) << i;
  }
  double mass = 0;
  for (const LogprobEntry& e : lp.top) mass += std::exp(e.logprob);
  EXPECT_LE(mass, 1.0 + 1e-6);
}

TEST(Logprobs, TiesGoToTheLowerIdAndKIsCappedByTheVocabulary) {
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 0.0f};
  const Logprobs lp = token_logprobs(logits, 0, 10);
  ASSERT_EQ(lp.top.size(), 4u);
  EXPECT_EQ(lp.top[0].id, 1);
  EXPECT_EQ(lp.top[1].id, 2);
  EXPECT_EQ(lp.top[0].logprob, lp.top[1].logprob);
  EXPECT_TRUE(token_logprobs(logits, 3, 0).top.empty());
}

TEST(Logprobs, NaNAndMinusInfinityHaveNoProbability) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {0.0f, std::nanf(""), -inf, 0.0f};
  const Logprobs lp = token_logprobs(logits, 1, 4);
  EXPECT_EQ(lp.chosen.logprob, -inf);
  EXPECT_NEAR(lp.top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_NEAR(lp.top[1].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(lp.top[2].logprob, -inf);
  const std::vector<float> none = {-inf, -inf};
  EXPECT_EQ(token_logprobs(none, 0, 1).chosen.logprob, -inf);
}

}  // namespace
}  // namespace nexus
