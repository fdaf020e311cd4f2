// The adversarial suite's shared probe helper (CTest label `adversarial`;
// docs/fuzzing.md, "Adversarial suite"): a `nexus serve` child process, raw
// byte exchanges, and the checks made after every probe (issue 26,
// acceptance):
//   - a normal completion is answered within kNormalCompletionBound
//     (100 ms; 10x under sanitizers, whose runtime slows everything down);
//   - /metrics shows no running sequence and no used KV block;
//   - the server's RSS (/proc/PID/status VmRSS) is back within 20 MB of its
//     value before the probe.
// The metric and RSS checks wait (bounded, 5 s) for the server to settle: a
// cancelled generation ends at its next token, freed memory is returned to
// the allocator's pool first.
//
// A probe is:   const ProbeMark mark = server.mark();  ... probe ...;  server.expect_recovered(mark, "what");
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/serve_process.h"
#include "support/test_support.h"

namespace nexus::test::adversarial {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// A time bound the issue sets, made generous under sanitizers.
inline std::chrono::milliseconds bound(std::chrono::milliseconds release) {
  return kSanitized ? release * 10 : release;
}
inline const std::chrono::milliseconds kNormalCompletionBound = bound(std::chrono::milliseconds(100));

struct ProbeMark {
  long rss_kb = 0;
};

class ProbeServer {
 public:
  // `model` is a path; `extra` more `nexus serve` flags. The server answers
  // one completion before the first probe (warm-up).
  ProbeServer(const std::string& model, const std::vector<std::string>& extra = {});
  uint16_t port() const { return serve_->port; }
  pid_t pid() const { return serve_->proc.pid(); }
  bool started() const { return serve_->port != 0; }

  long rss_kb() const;  // VmRSS of the server process
  ProbeMark mark() const { return ProbeMark{rss_kb()}; }
  // The three checks above; failures name `probe`.
  void expect_recovered(const ProbeMark& before, const std::string& probe) const;

  // Sends `bytes` on a new connection, half-closes it and returns all the
  // server sent until it closed (throws after 10 s).
  std::string exchange(const std::string& bytes) const;

 private:
  std::unique_ptr<ServeProcess> serve_;
};

// A plain TCP connection to the server for raw bytes; every wait is
// bounded (10 s, then std::runtime_error).
class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  void send(const std::string& bytes);  // what the server takes (it may close early)
  void shutdown_write();
  // Reads until `marker` was received; returns everything read so far.
  std::string read_until(const std::string& marker);
  // Reads until the server closes; returns everything read so far.
  std::string read_until_closed();

 private:
  bool read_some();  // false at EOF
  int fd_ = -1;
  std::string got_;
};

// A GoogleTest suite of probes against one server (stories260K, started once
// for the suite with Suite::server_flags() if the suite declares it), the
// probe.h checks after every test. Usage:
//   class MySuite : public ProbeSuite<MySuite> {
//    public: static std::vector<std::string> server_flags() { return {"--cors-allow-origin", "*"}; }
//   };
template <class Suite>
class ProbeSuite : public ::testing::Test {
 public:
  static std::vector<std::string> server_flags() { return {}; }

 protected:
  static void SetUpTestSuite() {
    const std::string model = shared_model_path("stories260K.gguf");
    if (require_file(model)) server_ = std::make_unique<ProbeServer>(model, Suite::server_flags());
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    if (!server_) GTEST_SKIP() << "stories260K.gguf not in ../shared/models";
    ASSERT_TRUE(server_->started());
    mark_ = server_->mark();
  }
  void TearDown() override {
    if (server_ && !IsSkipped())
      server_->expect_recovered(mark_, ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  static inline std::unique_ptr<ProbeServer> server_;
  ProbeMark mark_;
};

// The status of a raw HTTP response ("HTTP/1.1 400 ..." -> 400), 0 if none.
int status_of(const std::string& raw_response);
// The number of HTTP responses in `raw` (status lines at a line start).
size_t count_responses(const std::string& raw);
// The value of header `name` (case-insensitive) in the first response; "" if none.
std::string header_of(const std::string& raw_response, const std::string& name);
// The body of the first response (after the blank line).
std::string body_of(const std::string& raw_response);

}  // namespace nexus::test::adversarial
