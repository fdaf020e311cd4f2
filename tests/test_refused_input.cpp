// RefusedInput (server/refused_input.h): the pacing and the cut-off of a
// realtime session's refused messages, over byte counts and explicit times
// (body limit L = 1 MiB here, as the server's default).
#include <gtest/gtest.h>

#include <chrono>

#include "server/refused_input.h"

using nexus::server::RefusedInput;
using namespace std::chrono_literals;

namespace {

constexpr size_t kL = 1 << 20;

// One whole message of `bytes`, read in one piece at `now`.
void read_message(RefusedInput& r, size_t bytes) {
  r.on_read(bytes);
  r.end_message();
}

}  // namespace

TEST(RefusedInput, OneOrTwoRefusalsNeverWaitAndAcceptedInputIsFree) {
  RefusedInput r(kL);
  const auto t0 = RefusedInput::Clock::time_point{} + 100s;
  for (int i = 0; i < 10; ++i) read_message(r, kL / 2);  // accepted: nothing counted
  EXPECT_EQ(r.wait_before_read(t0), RefusedInput::Clock::duration::zero());
  read_message(r, 900 << 10);
  EXPECT_FALSE(r.refuse(t0));
  EXPECT_EQ(r.wait_before_read(t0), RefusedInput::Clock::duration::zero());
  read_message(r, 900 << 10);  // in debt: charged as it is read
  EXPECT_FALSE(r.refuse(t0));  // ... and not a second time when refused
  EXPECT_DOUBLE_EQ(r.refused(), 2.0 * (900 << 10));
  EXPECT_EQ(r.wait_before_read(t0), RefusedInput::Clock::duration::zero());  // 1.76 MiB < 2 MiB
}

TEST(RefusedInput, AClientThatKeepsSendingIsPacedAtTheLimitASecond) {
  RefusedInput r(kL);
  const auto t0 = RefusedInput::Clock::time_point{} + 100s;
  read_message(r, 3 * kL);
  EXPECT_FALSE(r.refuse(t0));
  // Debt 3 MiB: wait until it is 64 KiB under 2 MiB, 1 MiB + 64 KiB at 1 MiB/s.
  const double wait = std::chrono::duration<double>(r.wait_before_read(t0)).count();
  EXPECT_NEAR(wait, 1.0 + 64.0 / 1024, 1e-9);
  // Paid back meanwhile: no wait after it.
  EXPECT_EQ(r.wait_before_read(t0 + std::chrono::duration_cast<RefusedInput::Clock::duration>(
                                         std::chrono::duration<double>(wait))),
            RefusedInput::Clock::duration::zero());
}

TEST(RefusedInput, PastFourLimitsOfRefusedBytesTheSessionIsCutOff) {
  RefusedInput r(kL);
  const auto t0 = RefusedInput::Clock::time_point{} + 100s;
  // An oversized message refused at each read past the limit: its bytes count once.
  r.on_read(kL + 1);
  EXPECT_FALSE(r.refuse(t0));
  r.on_read(kL);
  EXPECT_FALSE(r.refuse(t0));
  EXPECT_FALSE(r.refuse(t0));  // nothing new read
  EXPECT_DOUBLE_EQ(r.refused(), 2.0 * kL + 1);
  r.on_read(2 * kL);
  EXPECT_TRUE(r.refuse(t0));  // 4 MiB + 1 > 4 MiB
  EXPECT_EQ(r.budget(), 4u * kL);
}

TEST(RefusedInput, RefusedBytesAreForgottenAtTheLimitAMinute) {
  RefusedInput r(kL);
  auto t = RefusedInput::Clock::time_point{} + 100s;
  // Five 900 KB refusals a minute apart never reach the 4 MiB budget
  // (found by the fresh-user trial: 3 s apart they did, with no forgetting).
  for (int i = 0; i < 5; ++i, t += 60s) {
    read_message(r, 900 << 10);
    EXPECT_FALSE(r.refuse(t)) << i;
  }
  EXPECT_LT(r.refused(), 2.0 * kL);
  // The same five at once are a flood.
  RefusedInput f(kL);
  bool cut = false;
  for (int i = 0; i < 5; ++i) {
    read_message(f, 900 << 10);
    cut = f.refuse(t);
  }
  EXPECT_TRUE(cut);
}
