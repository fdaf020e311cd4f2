// The CUDA backend's "is there a GPU?" path, which runs on every machine:
// without a device (or without a CUDA build) the query must return false
// with a reason -- not crash -- and `nexus run --device cuda` must fail fast
// with a clear message and a non-zero exit.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda_device.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace nexus;

TEST(CudaDevice, BuiltFlagMatchesTheBuild) {
#ifdef NEXUS_HAVE_CUDA
  EXPECT_TRUE(cuda_built());
#else
  EXPECT_FALSE(cuda_built());
  std::string why;
  EXPECT_FALSE(cuda_available(&why));
  EXPECT_EQ(why, kNoCudaBuildMessage);
#endif
}

TEST(CudaDevice, AvailabilityIsAnsweredCleanly) {
  std::string why;
  const bool ok = cuda_available(&why);
  EXPECT_EQ(ok, cuda_available());  // stable, and the reason pointer is optional
  if (ok) {
    const CudaDeviceInfo info = cuda_device_info();
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.total_bytes, 0u);
    EXPECT_GT(info.sm_count, 0);
    EXPECT_NE(cuda_device_summary(info).find(info.name), std::string::npos);
  } else {
    EXPECT_FALSE(why.empty());
    try {
      cuda_device_info();
      ADD_FAILURE() << "cuda_device_info() without a device must throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device: "), std::string::npos) << e.what();
    }
  }
}

TEST(CudaDevice, RunWithoutDeviceFailsWithAClearMessage) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: the no-device message cannot be observed";
  const test::CommandResult r = test::run_nexus("run --device cuda -p hi -n 1");
  EXPECT_NE(r.exit_code, 0);
  if (cuda_built()) EXPECT_NE(r.err.find("no CUDA device: "), std::string::npos) << r.err;
  else EXPECT_NE(r.err.find("rebuild with -DNEXUS_CUDA=ON"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CudaDevice, UnknownDeviceIsAUsageError) {
  const test::CommandResult r = test::run_nexus("run --device tpu -p hi -n 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
}
