// The adversarial suite, connection limits (issue 26, scope "bounds"):
// against a real `nexus serve` with short --header-timeout/--body-timeout
// and a small --max-connections, a stalled header or body gets 408
// request_timeout and a connection beyond the cap 503 too_many_connections,
// each as a JSON error; then the checks of probe.h. CTest label
// `adversarial`. (Descriptor exhaustion: tests/test_server_fd_exhaustion.cpp.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "adversarial/probe.h"

using namespace nexus::test;
using namespace nexus::test::adversarial;
using nlohmann::json;

namespace {

constexpr int kMaxConnections = 8;

json error_code_of(const std::string& raw) {
  const json j = json::parse(body_of(raw), nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"]["code"] : json();
}

class AdversarialLimits : public ProbeSuite<AdversarialLimits> {
 public:
  static std::vector<std::string> server_flags() { return {"--header-timeout", "0.3", "--body-timeout", "0.3", "--max-connections", std::to_string(kMaxConnections)}; }
};

}  // namespace

TEST_F(AdversarialLimits, StalledHeaderAndBodyGet408) {
  RawConnection header(server_->port());
  header.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-");
  const std::string h = header.read_until_closed();
  EXPECT_EQ(status_of(h), 408) << h;
  EXPECT_EQ(header_of(h, "Content-Type"), "application/json") << h;
  EXPECT_EQ(error_code_of(h), "request_timeout") << h;

  RawConnection body(server_->port());
  body.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n{\"prompt\":\"");
  const std::string b = body.read_until_closed();
  EXPECT_EQ(status_of(b), 408) << b;
  EXPECT_EQ(error_code_of(b), "request_timeout") << b;
}

TEST_F(AdversarialLimits, ConnectionsBeyondTheCapGet503) {
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < kMaxConnections; ++i) {
    held.push_back(std::make_unique<RawConnection>(server_->port()));
    held.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    held.back()->read_until("{\"status\":\"ok\"}");  // accepted, counted, kept alive
  }
  const std::string refused = server_->exchange("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(refused), 503) << refused;
  EXPECT_EQ(error_code_of(refused), "too_many_connections") << refused;
  EXPECT_EQ(header_of(refused, "Retry-After"), "1") << refused;
  held.clear();
  // The slots free up as soon as the server sees the closes (bounded wait).
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    status = status_of(server_->exchange("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
}
