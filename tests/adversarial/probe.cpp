#include "adversarial/probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <thread>

#include "support/http_client.h"
#include "support/metrics_text.h"

namespace nexus::test::adversarial {
namespace {

// Under AddressSanitizer freed memory waits in its quarantine (256 MB by
// default) instead of going back to the allocator, so the server's RSS
// after a probe says nothing about what it kept: the bound is checked in
// the release build only (the asan build still checks that nothing leaks).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NEXUS_ADVERSARIAL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define NEXUS_ADVERSARIAL_ASAN 1
#endif
#ifdef NEXUS_ADVERSARIAL_ASAN
constexpr long kRssBoundKb = 1L << 40;
#else
constexpr long kRssBoundKb = 20 * 1024;
#endif

constexpr const char* kNormalBody = R"({"prompt":"Once upon a time","max_tokens":2})";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ProbeServer::ProbeServer(const std::string& model, const std::vector<std::string>& extra)
    : serve_(std::make_unique<ServeProcess>(model, extra)) {
  if (!started()) return;
  HttpClient c("127.0.0.1", port());
  c.post("/v1/completions", kNormalBody);
}

long ProbeServer::rss_kb() const {
  std::ifstream in("/proc/" + std::to_string(pid()) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

void ProbeServer::expect_recovered(const ProbeMark& before, const std::string& probe) const {
  // A normal completion on a new connection, timed from connect to the whole answer.
  const auto t0 = std::chrono::steady_clock::now();
  HttpClient c("127.0.0.1", port());
  const HttpResponse r = c.post("/v1/completions", kNormalBody);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(r.status, 200) << "after " << probe << ": " << r.body;
  EXPECT_LE(took, kNormalCompletionBound) << "after " << probe << ": a normal completion took " << took.count()
                                          << " ms";
  // Nothing running, no KV held, memory back: bounded wait for the server to settle.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::optional<double> running, used;
  long rss = 0;
  for (;;) {
    const auto samples = parse_metrics_text(c.get("/metrics").body);
    running = metric_value(samples, "nexus_running_sequences");
    used = metric_value(samples, "nexus_kv_blocks", {{"state", "used"}});
    rss = rss_kb();
    const bool settled = running == 0.0 && used == 0.0 && rss - before.rss_kb <= kRssBoundKb;
    if (settled || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0.0) << "after " << probe << ": nexus_running_sequences";
  EXPECT_EQ(used, 0.0) << "after " << probe << ": nexus_kv_blocks{state=\"used\"}";
  EXPECT_LE(rss - before.rss_kb, kRssBoundKb) << "after " << probe << ": VmRSS " << before.rss_kb << " kB -> " << rss
                                            << " kB";
}

std::string ProbeServer::exchange(const std::string& bytes) const {
  RawConnection c(port());
  c.send(bytes);
  c.shutdown_write();
  return c.read_until_closed();
}

RawConnection::RawConnection(uint16_t port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw std::runtime_error("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect");
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

void RawConnection::send(const std::string& bytes) {
  for (size_t off = 0; off < bytes.size();) {
    const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close early (an error for the header)
    off += static_cast<size_t>(n);
  }
}

void RawConnection::shutdown_write() { shutdown(fd_, SHUT_WR); }

bool RawConnection::read_some() {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 10'000) <= 0) throw std::runtime_error("raw connection: nothing from the server for 10 s");
  char buf[16384];
  const ssize_t n = recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) return false;
  got_.append(buf, static_cast<size_t>(n));
  return true;
}

std::string RawConnection::read_until(const std::string& marker) {
  while (got_.find(marker) == std::string::npos)
    if (!read_some()) break;
  return got_;
}

std::string RawConnection::read_until_closed() {
  while (read_some()) {
  }
  return got_;
}

int status_of(const std::string& raw) {
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12) return 0;
  return std::stoi(raw.substr(9, 3));
}

size_t count_responses(const std::string& raw) {
  size_t n = raw.rfind("HTTP/1.", 0) == 0 ? 1 : 0;
  for (size_t at = raw.find("\nHTTP/1."); at != std::string::npos; at = raw.find("\nHTTP/1.", at + 1)) ++n;
  return n;
}

std::string header_of(const std::string& raw, const std::string& name) {
  const std::string head = lower(raw.substr(0, raw.find("\r\n\r\n"))) + "\r\n";
  const size_t at = head.find("\r\n" + lower(name) + ":");
  if (at == std::string::npos) return "";
  size_t v = at + 3 + name.size();
  while (v < head.size() && head[v] == ' ') ++v;
  return raw.substr(v, head.find("\r\n", v) - v);
}

std::string body_of(const std::string& raw) {
  const size_t at = raw.find("\r\n\r\n");
  return at == std::string::npos ? "" : raw.substr(at + 4);
}

}  // namespace nexus::test::adversarial
