// A real Prometheus (Debian's `prometheus` package, scripts/install-deps.sh)
// scrapes `nexus serve`: the exposition must be accepted by the reference
// parser, and the TTFT histogram must be queryable with PromQL. Without the
// binary: a failure under CI=true, a skip elsewhere.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/child_process.h"
#include "support/http_client.h"
#include "support/metrics_text.h"
#include "support/serve_process.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";

// Removes the directory (Prometheus' TSDB, config) however the test ends.
struct TempDir {
  std::string path = make_temp_dir();
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// A loopback port that was free a moment ago (bind to 0, read, close).
uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// GET on a fresh connection; nullopt when nothing answers (yet).
std::optional<HttpResponse> try_get(uint16_t port, const std::string& target) {
  try {
    HttpClient c("127.0.0.1", port, 5s);
    return c.get(target);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Polls an instant query until its result vector is non-empty (or ~30 s pass);
// returns the first result's value.
std::optional<double> query_until_present(uint16_t port, const std::string& promql) {
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < end) {
    if (auto r = try_get(port, "/api/v1/query?query=" + url_encode(promql)); r && r->status == 200) {
      const json j = json::parse(r->body, nullptr, false);
      if (j.is_object() && j.value("status", "") == "success" && !j["data"]["result"].empty())
        return std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
    }
    std::this_thread::sleep_for(250ms);
  }
  return std::nullopt;
}

}  // namespace

TEST(Prometheus, ScrapesNexusServeAndAnswersPromQL) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  if (!require_file(kPrometheus)) {
    if (HasFailure()) return;
    GTEST_SKIP() << kPrometheus << " not installed (scripts/install-deps.sh; set CI=true to fail instead)";
  }

  ServeProcess serve(model);
  ASSERT_GT(serve.port, 0) << "nexus serve did not start";
  constexpr int kRequests = 3;
  {
    HttpClient c("127.0.0.1", serve.port);
    for (int i = 0; i < kRequests; ++i) {
      const HttpResponse r = c.post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 4}}.dump());
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  // Our own reading of the TTFT histogram, to check Prometheus' quantile against.
  const auto own = parse_metrics_text(try_get(serve.port, "/metrics").value_or(HttpResponse{}).body);
  const auto buckets = histogram_buckets(own, "nexus_time_to_first_token_seconds");
  ASSERT_FALSE(buckets.empty());

  TempDir dir;
  const std::string config = dir.path + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: nexus\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << serve.port << "']\n";
  const uint16_t prom_port = free_port();
  ASSERT_GT(prom_port, 0);
  ChildProcess prom({kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir.path + "/data",
                     "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"});

  bool ready = false;
  for (auto end = std::chrono::steady_clock::now() + 30s; !ready && std::chrono::steady_clock::now() < end;) {
    auto r = try_get(prom_port, "/-/ready");
    ready = r && r->status == 200;
    if (!ready) std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(ready) << "prometheus did not become ready on port " << prom_port;

  const auto count = query_until_present(prom_port, "nexus_time_to_first_token_seconds_count{job=\"nexus\"}");
  ASSERT_TRUE(count.has_value()) << "no TTFT samples scraped within 30 s";
  EXPECT_EQ(*count, kRequests);
  const auto tokens = query_until_present(prom_port, "nexus_generation_tokens_total");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(*tokens, metric_value(own, "nexus_generation_tokens_total"));
  // The scrape was healthy (a parse error would set up to 0).
  EXPECT_EQ(query_until_present(prom_port, "up{job=\"nexus\"}"), 1);

  // p99 over every observation so far: it must fall inside the bucket where
  // the cumulative count crosses 99% (Prometheus interpolates linearly there).
  const auto p99 = query_until_present(prom_port, "histogram_quantile(0.99, nexus_time_to_first_token_seconds_bucket)");
  ASSERT_TRUE(p99.has_value());
  double lower = 0, upper = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i].second >= 0.99 * kRequests) {
      upper = buckets[i].first;
      lower = i > 0 ? buckets[i - 1].first : 0;
      break;
    }
  }
  EXPECT_GE(*p99, lower);
  EXPECT_LE(*p99, upper);
  EXPECT_TRUE(std::isfinite(*p99));

  EXPECT_EQ(prom.stop(SIGTERM), 0);
  EXPECT_EQ(serve.proc.stop(SIGTERM), 0);
}
