// Kernels against hand-computed values and a float64 reference: fp16/bf16,
// dequantization of Q8_0/Q4_0, activation quantization, ops, the thread
// pool. (The products and the kernel table: test_matmul.cpp.)
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/ops.h"
#include "kernels/quant_blocks.h"
#include "kernels/thread_pool.h"

using namespace nexus;

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7c00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // ties to even -> inf
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

// The F16C path (KV cache writes) against the portable one: every half's
// value, the midpoints between neighbours (ties), and random floats.
TEST(Fp16, BulkConversionMatchesScalar) {
  std::vector<float> in;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h)), g = fp16_to_fp32(static_cast<uint16_t>(h + 1));
    for (float v : {f, (f + g) / 2, -f, -(f + g) / 2}) in.push_back(v);
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 10000; ++i) in.push_back(u(rng));
  in.push_back(std::numeric_limits<float>::infinity());
  std::vector<uint16_t> out(in.size());
  fp32_to_fp16_n(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], fp32_to_fp16(in[i])) << in[i];
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc040), -3.0f);
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(1.00390625f), 0x3f80);  // exactly half an ulp: ties to even
  EXPECT_EQ(fp32_to_bf16(1.01171875f), 0x3f82);  // 1.5 ulp: ties to even (up)
}

TEST(Dequant, Q8_0Block) {
  BlockQ8_0 b{};
  b.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  float out[32];
  dequantize_row(GgmlType::Q8_0, &b, out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
  b.qs[0] = -128;
  b.qs[1] = 127;
  dequantize_row(GgmlType::Q8_0, &b, out, 32);
  EXPECT_EQ(out[0], -64.0f);
  EXPECT_EQ(out[1], 63.5f);
}

TEST(Dequant, Q4_0Block) {
  BlockQ4_0 b{};
  b.d = fp32_to_fp16(2.0f);
  // byte j: low nibble = value j, high nibble = value j + 16.
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j & 0x0f) | ((15 - j) << 4));
  float out[32];
  dequantize_row(GgmlType::Q4_0, &b, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * (j - 8)) << j;
    EXPECT_EQ(out[j + 16], 2.0f * ((15 - j) - 8)) << j;
  }
}

TEST(Dequant, F16AndBf16Rows) {
  const uint16_t h[4] = {0x3c00, 0xbc00, 0x3800, 0x0000};  // 1, -1, 0.5, 0
  const uint16_t b[4] = {0x3f80, 0xbf80, 0x3f00, 0x4049};  // 1, -1, 0.5, 3.140625
  float out[4];
  dequantize_row(GgmlType::F16, h, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -1.0f);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_EQ(out[3], 0.0f);
  dequantize_row(GgmlType::BF16, b, out, 4);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_EQ(out[3], 3.140625f);
}

// matmul() quantizes with the AVX-512 version where the CPU has it; the
// kernels' tests quantize with the portable one: they must agree bit for bit.
TEST(ActQuant, Avx512MatchesPortableBitForBit) {
  if (!cpu_features().avx512_vnni) GTEST_SKIP() << "no AVX-512";
  const int64_t n = 32 * 64;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float scale : {1e-30f, 1e-3f, 1.0f, 37.0f, 1e20f}) {
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng) * scale;
    for (int64_t j = 0; j < 32; ++j) x[j] = 0.0f;                 // an all-zero block (d = 0)
    for (int64_t j = 32; j < 64; ++j) x[j] = (j % 2 ? 1.5f : -2.5f) * scale;  // ties at .5 after scaling
    x[70] = -x[70] * 1e3f;                                           // one outlier
    std::vector<BlockQ8Act> a(n / 32), b(n / 32);
    quantize_act_q8(x.data(), a.data(), n);
    quantize_act_q8_avx512(x.data(), b.data(), n);
    for (int64_t i = 0; i < n / 32; ++i) {
      EXPECT_EQ(std::memcmp(&a[i].d, &b[i].d, sizeof(float)), 0) << "block " << i << " scale " << scale;
      EXPECT_EQ(a[i].qsum, b[i].qsum) << "block " << i << " scale " << scale;
      EXPECT_EQ(std::memcmp(a[i].qs, b[i].qs, 32), 0) << "block " << i << " scale " << scale;
    }
  }
}

TEST(Ops, RmsNorm) {
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 0.5f};
  float out[4];
  rmsnorm(out, x, w, 4, 0.0f);
  const float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  EXPECT_NEAR(out[0], 1 / rms, 1e-6);
  EXPECT_NEAR(out[2], 2 * 3 / rms, 1e-6);
  EXPECT_NEAR(out[3], 0.5f * 4 / rms, 1e-6);
}

TEST(Ops, RopeRotatesAdjacentPairs) {
  // head_dim 4, n_rot 4: pair (0,1) rotates by pos, pair (2,3) by pos * base^(-1/2).
  float x[4] = {1, 0, 1, 0};
  rope(x, 1, 4, 4, 3, 100.0f);
  EXPECT_NEAR(x[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.3), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.3), 1e-6);
}

// The batch path (angles once per token, applied per layer) rotates exactly
// as rope() does.
TEST(Ops, RopeAnglesThenApplyEqualsRope) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const int32_t n_head = 3, head_dim = 8;
  for (int32_t n_rot : {2, 4, 8})
    for (int32_t pos : {0, 1, 17, 4095}) {
      std::vector<float> a(n_head * head_dim), cs(static_cast<size_t>(n_rot));
      for (float& v : a) v = u(rng);
      std::vector<float> b = a;
      rope(a.data(), n_head, head_dim, n_rot, pos, 10000.0f);
      rope_angles(pos, n_rot, 10000.0f, cs.data());
      rope_apply(b.data(), n_head, head_dim, n_rot, cs.data());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "n_rot " << n_rot << " pos " << pos << " i " << i;
    }
}

TEST(Ops, SoftmaxAndSwiglu) {
  float s[3] = {10, 10, 10 - std::log(2.0f)};  // large values: max subtraction keeps exp finite
  softmax(s, 3);
  EXPECT_NEAR(s[0], 0.4, 1e-6);
  EXPECT_NEAR(s[2], 0.2, 1e-6);
  float g[2] = {0, 2};
  const float up[2] = {5, 3};
  swiglu(g, up, 2);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 2 / (1 + std::exp(-2.0)) * 3, 1e-5);
}

// The vector and tail paths against silu in double, both signs, large |g|.
TEST(Ops, SwigluMatchesFloat64) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  std::vector<float> g(203), up(203), out;
  for (size_t i = 0; i < g.size(); ++i) g[i] = u(rng), up[i] = u(rng);
  g[0] = -100.0f, g[1] = 100.0f, g[2] = -0.0f;
  out = g;
  swiglu(out.data(), up.data(), static_cast<int64_t>(out.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i], want = x / (1 + std::exp(-x)) * up[i];
    ASSERT_NEAR(out[i], want, 2e-6 * std::fabs(want) + 1e-30) << "g " << g[i];
  }
}

TEST(ThreadPool, CoversRangeExactlyOnceAndPropagatesErrors) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
  EXPECT_THROW(pool.parallel_for(10, [](int64_t b, int64_t) { if (b > 0) throw std::runtime_error("x"); }),
               std::runtime_error);
  // The pool still works after an error.
  int sum = 0;
  std::mutex mu;
  pool.parallel_for(10, [&](int64_t b, int64_t e) { std::lock_guard l(mu); sum += static_cast<int>(e - b); });
  EXPECT_EQ(sum, 10);
}

// On a busy machine a worker may not run for a scheduler time slice. The
// caller must not wait for it: it runs every range no worker has claimed.
// Here the worker is held where no call can reach it -- in a signal handler
// entered while it sleeps between calls, holding no lock -- so every call
// must be run whole by its caller; a caller that waited for the worker's
// range would never return (before the fix it waited a time slice per call).
namespace {

std::atomic<bool> g_worker_parked{false}, g_worker_released{false};

// Lock-free atomics and nanosleep only: async-signal-safe.
extern "C" void park_worker(int) {
  g_worker_parked.store(true);
  const timespec ms{0, 1'000'000};
  while (!g_worker_released.load()) nanosleep(&ms, nullptr);
}

// The system call thread `tid` of this process is blocked in, from
// /proc/self/task/TID/syscall: its number, -1 while it runs, -2 unreadable.
long blocked_in(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
  if (!f) return -2;
  long nr = -1;
  return f >> nr ? nr : -1;
}

// Runs parallel_for(2) with the caller held in range 0 until range 1 is
// done, so the worker must run range 1; returns the worker's ids.
std::pair<pthread_t, pid_t> worker_of(ThreadPool& pool) {
  std::atomic<bool> ran{false};
  pthread_t thread{};
  pid_t tid = 0;
  pool.parallel_for(2, [&](int64_t b, int64_t) {
    if (b == 0) {
      while (!ran.load()) std::this_thread::yield();
      return;
    }
    thread = pthread_self();
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    ran = true;
  });
  return {thread, tid};
}

}  // namespace

TEST(ThreadPool, CallerDoesNotWaitForAWorkerThatHasNotStarted) {
  ThreadPool pool(2);
  const auto [worker, worker_tid] = worker_of(pool);
  // Asleep on the pool's condition variable (a futex wait, the mutex
  // released), not spinning or holding the mutex: park it there.
  for (long nr; (nr = blocked_in(worker_tid)) != SYS_futex;) {
    if (nr == -2) GTEST_SKIP() << "/proc/self/task/TID/syscall is not readable here";
    std::this_thread::yield();
  }
  struct sigaction park {}, saved{};
  park.sa_handler = park_worker;
  sigemptyset(&park.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &park, &saved), 0);
  g_worker_parked = false;
  g_worker_released = false;
  ASSERT_EQ(pthread_kill(worker, SIGUSR1), 0);
  while (!g_worker_parked.load()) std::this_thread::yield();

  std::vector<int> hits(64, 0);
  std::atomic<int> pieces_by_others{0};
  // On another thread, so that a caller stuck waiting for the parked worker
  // fails the test (below) instead of hanging it; 60 s is a hang guard, not
  // a speed limit: a correct caller needs no worker at all.
  auto calls = std::async(std::launch::async, [&] {
    const std::thread::id caller = std::this_thread::get_id();
    for (int call = 0; call < 1000; ++call) {
      pool.parallel_for(64, [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() != caller) ++pieces_by_others;
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
    }
  });
  const bool returned = calls.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  g_worker_released = true;
  calls.wait();
  ASSERT_EQ(sigaction(SIGUSR1, &saved, nullptr), 0);
  EXPECT_TRUE(returned) << "the caller waited for a worker that had not started";
  EXPECT_EQ(pieces_by_others.load(), 0) << "the parked worker ran a range";
  for (int h : hits) ASSERT_EQ(h, 1000);
  // Released, the worker takes its range again.
  EXPECT_EQ(worker_of(pool).second, worker_tid);
}

// parallel_for_stealing: every item once, in pieces of at most the grain;
// a thread held up in its first piece leaves the rest of its own range to
// the others, who take it from the back.
TEST(ThreadPool, StealingCoversRangeExactlyOnceAndAFreeThreadTakesMore) {
  ThreadPool pool(3);
  for (auto [n, grain] : {std::pair<int64_t, int64_t>{0, 4}, {1, 4}, {7, 3}, {1000, 16}, {10, 0}, {5, 100}}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> pieces;
    pool.parallel_for_stealing(n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      std::lock_guard l(mu);
      pieces.emplace_back(b, e);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "n " << n << " grain " << grain;
    if (grain > 0 && n > 1) {
      for (auto [b, e] : pieces) EXPECT_TRUE(b < e && e - b <= grain) << b << ".." << e;
    }
  }
  // 66 items in pieces of 1: the caller's range is [0, 22). The workers wait
  // in their first piece until the caller is in its first (item 0), so that
  // one is the caller's; the caller then stays there until the 65 other
  // items are done. So the two workers run all the rest, the caller's
  // items 1-21 included, each taking those from the back.
  constexpr int64_t kItems = 66;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> caller_held{false};
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::vector<int> runs(kItems, 0);
  std::vector<int64_t> by_caller;
  std::map<std::thread::id, std::vector<int64_t>> caller_range_by_worker;  // in the order taken
  pool.parallel_for_stealing(kItems, 1, [&](int64_t b, int64_t e) {
    const std::thread::id me = std::this_thread::get_id();
    if (me == caller && b == 0) {
      caller_held = true;
      // Until the others are done; the deadline is a hang guard (threads
      // that did not steal would leave the caller waiting forever).
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (done.load() < kItems - 1 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    } else if (me != caller) {
      while (!caller_held.load()) std::this_thread::yield();
    }
    {
      std::lock_guard l(mu);
      for (int64_t i = b; i < e; ++i) {
        ++runs[static_cast<size_t>(i)];
        if (me == caller) by_caller.push_back(i);
        else if (i < 22) caller_range_by_worker[me].push_back(i);
      }
    }
    done += e - b;
  });
  EXPECT_EQ(runs, std::vector<int>(kItems, 1));
  EXPECT_EQ(by_caller, std::vector<int64_t>{0}) << "the held-up caller ran only its first item";
  size_t taken = 0;
  for (const auto& [worker, items] : caller_range_by_worker) {
    taken += items.size();
    EXPECT_TRUE(std::is_sorted(items.rbegin(), items.rend())) << "a thief takes the caller's items from the back";
  }
  EXPECT_EQ(taken, 21u) << "the workers took the rest of the caller's range";
  EXPECT_THROW(pool.parallel_for_stealing(10, 2, [](int64_t b, int64_t) { if (b == 4) throw std::runtime_error("x"); }),
               std::runtime_error);
}
