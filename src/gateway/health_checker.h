// HealthChecker: the active checks of one replica, over one kept-alive
// connection of its own (not the request pool).
//
// Every load_interval (<= 100 ms) it sends GET /load and stores the answer in
// the replica's LoadState and draining flag; every health_interval it sends
// GET /health instead. An answer within probe_timeout is a success for the
// breaker (it closes a half-open breaker); a connect error, reset, timeout,
// unparseable /load or a /health other than 200 or 503 is a failure (a
// 503 means draining: the replica is alive but takes no new requests).
// A failure also marks since when the replica's probes fail
// (Replica::probe_failing_since, cleared by a success).
// Each /health probe first resolves the replica's name again
// (ConnectionPool::refresh's reason); a name that does not resolve is a
// failed probe.
// Runs on its own strand; stop() ends it (thread-safe).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "gateway/replica.h"

namespace nexus::gateway {

class GatewayMetrics;

struct HealthOptions {
  std::chrono::milliseconds load_interval{50};
  std::chrono::milliseconds health_interval{500};
  std::chrono::milliseconds probe_timeout{500};
};

class HealthChecker : public std::enable_shared_from_this<HealthChecker> {
 public:
  HealthChecker(boost::asio::any_io_executor strand, Replica& replica, GatewayMetrics& metrics, HealthOptions opts);
  void start();
  void stop();

 private:
  void tick();
  void probe();
  void on_connect(boost::system::error_code ec);
  void send();
  void on_read(boost::system::error_code ec);
  void finish(bool ok);
  void arm_timeout();

  boost::asio::any_io_executor strand_;
  Replica& replica_;
  GatewayMetrics& metrics_;
  HealthOptions opts_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer interval_, timeout_;
  boost::beast::flat_buffer buffer_;
  boost::beast::http::request<boost::beast::http::empty_body> req_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser_;
  std::chrono::steady_clock::time_point next_health_{};
  bool checking_health_ = false;  // this probe is GET /health (else GET /load)
  bool stopped_ = false;
  uint64_t probe_seq_ = 0;
};

}  // namespace nexus::gateway
