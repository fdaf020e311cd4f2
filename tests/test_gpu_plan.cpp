// Host-side GPU planning (model/gpu_plan.h): runs everywhere, GPU or not.
#include <gtest/gtest.h>

#include <vector>

#include "model/gpu_plan.h"
#include "util/error.h"

using namespace nexus;

TEST(GpuPlan, GpuLayersResolve) {
  EXPECT_EQ(resolve_gpu_layers(-1, 22), 22);
  EXPECT_EQ(resolve_gpu_layers(5, 22), 5);
  EXPECT_EQ(resolve_gpu_layers(22, 22), 22);
  EXPECT_EQ(resolve_gpu_layers(99, 22), 22);  // llama.cpp's -ngl 99: everything
  EXPECT_THROW(resolve_gpu_layers(0, 22), Error);
  EXPECT_THROW(resolve_gpu_layers(-2, 22), Error);
}

TEST(GpuPlan, BucketsArePowersOfTwoThenMultiplesOfEight) {
  EXPECT_EQ(decode_buckets(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(decode_buckets(3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(decode_buckets(8), (std::vector<int32_t>{1, 2, 4, 8}));
  EXPECT_EQ(decode_buckets(32), (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32}));
  EXPECT_EQ(decode_buckets(20), (std::vector<int32_t>{1, 2, 4, 8, 16, 20}));
  EXPECT_THROW(decode_buckets(0), Error);
}

TEST(GpuPlan, PickBucketIsSmallestThatFits) {
  const std::vector<int32_t> b = decode_buckets(32);
  EXPECT_EQ(pick_bucket(b, 1), 1);
  EXPECT_EQ(pick_bucket(b, 3), 4);
  EXPECT_EQ(pick_bucket(b, 8), 8);
  EXPECT_EQ(pick_bucket(b, 9), 16);
  EXPECT_EQ(pick_bucket(b, 17), 24);
  EXPECT_EQ(pick_bucket(b, 32), 32);
  EXPECT_EQ(pick_bucket(b, 33), -1);
  EXPECT_EQ(pick_bucket(b, 0), -1);
  // Every n in range gets a bucket that holds it, with less than 2x (or 8) padding.
  for (int32_t n = 1; n <= 32; ++n) {
    const int32_t k = pick_bucket(b, n);
    ASSERT_GE(k, n);
    EXPECT_LT(k - n, std::max(n, 8));
  }
}
