#include "gateway/health_checker.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "gateway/gateway_metrics.h"

namespace nexus::gateway {

namespace net = boost::asio;
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

HealthChecker::HealthChecker(net::any_io_executor strand, Replica& replica, GatewayMetrics& metrics, HealthOptions opts)
    : strand_(strand), replica_(replica), metrics_(metrics), opts_(opts), resolver_(strand), socket_(strand), interval_(strand), timeout_(strand) {}

void HealthChecker::start() {
  net::post(strand_, [self = shared_from_this()] { self->tick(); });
}

void HealthChecker::stop() {
  net::post(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->interval_.cancel();
    self->timeout_.cancel();
    self->resolver_.cancel();
    boost::system::error_code ignored;
    self->socket_.close(ignored);
  });
}

void HealthChecker::arm_timeout() {
  const uint64_t seq = ++probe_seq_;
  timeout_.expires_after(opts_.probe_timeout);
  timeout_.async_wait([self = shared_from_this(), seq](boost::system::error_code ec) {
    if (ec || seq != self->probe_seq_ || self->stopped_) return;
    self->resolver_.cancel();
    boost::system::error_code ignored;
    self->socket_.close(ignored);  // the pending resolve/connect/write/read fails
  });
}

void HealthChecker::tick() {
  if (stopped_) return;
  if (!replica_.listed.load()) {  // DNS discovery dropped it: nothing to probe until it is back
    interval_.expires_after(opts_.health_interval);
    interval_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->tick();
    });
    return;
  }
  const auto now = Clock::now();
  checking_health_ = now >= next_health_;
  if (checking_health_) next_health_ = now + opts_.health_interval;
  arm_timeout();
  if (!checking_health_) return probe();
  resolver_.async_resolve(
      replica_.pool.host(), replica_.pool.port(),
      net::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec,
                                                              const net::ip::tcp::resolver::results_type& results) {
        if (self->stopped_) return;
        if (ec == net::error::operation_aborted) return self->finish(false);  // timed out: keep the last addresses
        ConnectionPool::Endpoints eps;
        if (!ec)
          for (const auto& r : results) eps.push_back(r.endpoint());
        if (self->replica_.pool.set_endpoints(std::move(eps), ec ? ec.message() : "")) {
          boost::system::error_code ignored;
          self->socket_.close(ignored);  // it leads to the old address
        }
        if (ec) return self->finish(false);
        self->probe();
      }));
}

void HealthChecker::probe() {
  if (socket_.is_open()) return send();
  net::async_connect(socket_, replica_.pool.endpoints(),
                     net::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec, const auto&) {
                       self->on_connect(ec);
                     }));
}

void HealthChecker::on_connect(boost::system::error_code ec) {
  if (stopped_) return;
  if (ec) return finish(false);
  socket_.set_option(net::ip::tcp::no_delay(true));
  send();
}

void HealthChecker::send() {
  req_ = {};
  req_.method(http::verb::get);
  req_.target(replica_.url.base_path + (checking_health_ ? "/health" : "/load"));
  req_.version(11);
  req_.set(http::field::host, replica_.id);
  req_.keep_alive(true);
  http::async_write(socket_, req_, net::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec, size_t) {
                      if (self->stopped_) return;
                      if (ec) return self->finish(false);
                      self->parser_.emplace();
                      self->parser_->body_limit(64 * 1024);
                      http::async_read(self->socket_, self->buffer_, *self->parser_,
                                       net::bind_executor(self->strand_, [self](boost::system::error_code ec, size_t) {
                                         self->on_read(ec);
                                       }));
                    }));
}

void HealthChecker::on_read(boost::system::error_code ec) {
  if (stopped_) return;
  if (ec) return finish(false);
  const auto& res = parser_->get();
  const int status = res.result_int();
  if (!res.keep_alive()) {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }
  if (checking_health_) {
    if (status == 503) replica_.draining.store(true);
    return finish(status == 200 || status == 503);
  }
  // /load while draining still answers 200 with "draining": true.
  if (status != 200) return finish(status == 503 ? (replica_.draining.store(true), true) : false);
  const auto load = parse_load(res.body());
  if (!load) return finish(false);
  replica_.load.on_poll(*load);
  replica_.draining.store(load->draining);
  metrics_.replica(replica_.index).load_score->set(replica_.load.score());
  finish(true);
}

void HealthChecker::finish(bool ok) {
  ++probe_seq_;  // disarms the timeout
  timeout_.cancel();
  const auto now = Clock::now();
  if (ok) {
    replica_.probe_failing_since.store(0);
    replica_.breaker.record_success(now);
  } else {
    CircuitBreaker::Clock::rep none = 0;
    replica_.probe_failing_since.compare_exchange_strong(none, now.time_since_epoch().count());
    boost::system::error_code ignored;
    socket_.close(ignored);
    buffer_.clear();
    replica_.load.on_poll_failed();
    replica_.breaker.record_failure(now);
    replica_.pool.clear();  // its kept connections are likely dead too
  }
  metrics_.replica(replica_.index).in_flight->set(replica_.load.in_flight());
  if (stopped_) return;
  interval_.expires_after(opts_.load_interval);
  interval_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->tick();
  });
}

}  // namespace nexus::gateway
