// ProxySession's attempts (proxy_session.h): choose a replica, fault
// injection, connect or reuse, write, read the answer, relay a stream,
// retry or give up.
#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>

#include "gateway/proxy_http.h"
#include "gateway/proxy_session.h"
#include "server/sse.h"

namespace nexus::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

bool retryable_status(int status) { return status == 429 || status >= 500; }

}  // namespace

// ---- attempts -------------------------------------------------------------

void ProxySession::start_attempt() {
  const auto now = Clock::now();
  // Up to one pass per replica: a breaker may refuse between the filter and
  // the admission (another session took the last half-open probe).
  for (size_t pass = 0; pass < ctx_.replicas.size(); ++pass) {
    std::vector<Candidate> fresh, any;
    for (auto& r : ctx_.replicas) {
      if (!r->available(now)) continue;
      const Candidate c{r->index, r->load.score()};
      any.push_back(c);
      if (!tried_[r->index]) fresh.push_back(c);
    }
    const std::vector<Candidate>& candidates = fresh.empty() ? any : fresh;
    if (candidates.empty()) break;
    const RouteDecision d = ctx_.router.choose(candidates, attempts_ == 0 ? prefix_ : std::vector<uint64_t>{});
    const Admission a = ctx_.replicas[d.replica]->breaker.try_acquire(now);
    if (a == Admission::Denied) {
      tried_[d.replica] = true;
      continue;
    }
    if (attempts_ == 0 && d.affinity != AffinityResult::None) ctx_.metrics.affinity(d.affinity).inc();
    return begin_attempt(d.replica, a);
  }
  // No replica can take it: relay the last answer if there was one, else 503.
  if (last_answer_ || !last_error_.empty()) return give_up();
  ctx_.metrics.no_replica_requests().inc();
  proxying_ = false;
  ctx_.in_flight.fetch_sub(1);
  ctx_.metrics.in_flight().add(-1);
  release_tenant();
  replica_ = nullptr;
  respond(503, api_error_body(503, "No replica is available to take the request.", "no_replica_available"),
          "application/json", "Retry-After: 1\r\n");
}

void ProxySession::begin_attempt(size_t index, Admission admission) {
  ++attempts_;
  tried_[index] = true;
  replica_ = ctx_.replicas[index].get();
  probe_ = admission == Admission::Probe;
  attempt_open_ = true;
  replica_->load.begin_request();
  ctx_.metrics.replica(index).routed->inc();
  ctx_.metrics.replica(index).in_flight->set(replica_->load.in_flight());
  timed_out_ = false;
  breaker_opened_ = false;
  streaming_ = false;
  interim_answers_ = 0;
  body_.clear();
  up_buf_.clear();
  arm_deadline(ctx_.opts.ttft_timeout);

  const FaultDecision fault = decide_faults(ctx_.opts.faults, replica_->url.to_string(), rng_);
  auto go = [this, fault] {
    if (fault.abort_status) {
      ctx_.metrics.faults(FaultKind::Abort).inc();
      const int s = *fault.abort_status;
      return on_answer(Answer{s, api_error_body(s, "Fault injected by the gateway (--fault abort).", "fault_injected"),
                              "application/json", ""});
    }
    connect_upstream();
  };
  if (fault.delay.count() > 0) {
    ctx_.metrics.faults(FaultKind::Delay).inc();
    backoff_.expires_after(fault.delay);
    backoff_.async_wait([self = shared_from_this(), go](boost::system::error_code ec) {
      if (ec) return;
      if (self->timed_out_) return self->attempt_timed_out();
      go();
    });
    return;
  }
  go();
}

// One timer serves every deadline of a request (connect, TTFT, a stream's
// idle gap). Pushing it later costs no timer operation: a stream re-arms it
// on every chunk, and the pending wait, when it fires before the deadline,
// just waits again for the rest. Only an earlier deadline re-arms the timer.
void ProxySession::arm_deadline(std::chrono::milliseconds d) {
  deadline_at_ = Clock::now() + d;
  deadline_armed_ = true;
  if (deadline_waiting_ && deadline_.expiry() <= deadline_at_) return;
  wait_deadline();
}

// While an attempt has sent nothing to the client yet, its wait also wakes
// every kBreakerWatch to look at the replica's breaker: a replica that
// stopped answering (frozen, SIGSTOP; its health checks fail and the breaker
// opens in about a second) would otherwise hold the request until the TTFT
// limit (30 s by default); the request moves to another replica instead.
void ProxySession::wait_deadline() {
  constexpr auto kBreakerWatch = std::chrono::milliseconds(100);
  const uint64_t seq = ++deadline_seq_;
  deadline_waiting_ = true;
  deadline_.expires_at(watching_breaker() ? std::min(deadline_at_, Clock::now() + kBreakerWatch) : deadline_at_);
  deadline_.async_wait([self = shared_from_this(), seq](boost::system::error_code ec) {
    if (seq != self->deadline_seq_) return;  // replaced by a later wait
    self->deadline_waiting_ = false;
    if (ec || !self->deadline_armed_) return;
    if (self->watching_breaker() && self->replica_->breaker.state() == BreakerState::Open) {
      self->deadline_armed_ = false;
      self->breaker_opened_ = true;
      self->timed_out_ = true;  // the pending upstream operation fails as on a timeout
      boost::system::error_code ignored;
      if (self->up_) self->up_->close(ignored);
      return;
    }
    if (Clock::now() < self->deadline_at_) return self->wait_deadline();  // pushed later meanwhile
    self->deadline_armed_ = false;
    self->timed_out_ = true;
    boost::system::error_code ignored;
    if (self->up_) self->up_->close(ignored);  // the pending upstream operation fails
  });
}

void ProxySession::connect_upstream() {
  up_ = replica_->pool.take_idle();
  up_reused_ = up_ != nullptr;
  if (up_) return write_upstream();
  up_ = replica_->pool.fresh();
  // The connect has its own, shorter limit; the TTFT limit counts from the
  // connection.
  arm_deadline(std::min(ctx_.opts.connect_timeout, ctx_.opts.ttft_timeout));
  upstream_pending_ = true;
  net::async_connect(*up_, replica_->pool.endpoints(),
                     net::bind_executor(client_.get_executor(), [self = shared_from_this()](
                                                                    boost::system::error_code ec, const auto&) {
                       self->upstream_pending_ = false;
                       if (self->stopping_) return self->end_for_shutdown();
                       if (ec) return self->attempt_failed(RetryReason::Connect, "connect: " + ec.message());
                       boost::system::error_code ignored;
                       self->up_->set_option(net::ip::tcp::no_delay(true), ignored);
                       // The TTFT limit counts from the connection.
                       self->arm_deadline(self->ctx_.opts.ttft_timeout);
                       self->write_upstream();
                     }));
}

bool ProxySession::begin_upstream_request() {
  up_req_ = {};
  up_req_.method(req_.method());
  up_req_.target(replica_->url.base_path + std::string(req_.target()));
  up_req_.version(11);
  // The client's key is the gateway's to check, not the replica's.
  return ctx_.limiter || !ctx_.opts.replica_api_key.empty();
}

void ProxySession::write_upstream() {
  const bool own_key = begin_upstream_request();
  for (const auto& f : req_)
    if (end_to_end(f.name()) && !(own_key && client_credential(f)))
      up_req_.insert(f.name_string(), f.value());
  if (!ctx_.opts.replica_api_key.empty()) up_req_.set(http::field::authorization, "Bearer " + ctx_.opts.replica_api_key);
  up_req_.set(http::field::host, replica_->id);
  up_req_.keep_alive(true);
  up_req_.body() = req_.body();
  up_req_.prepare_payload();
  sent_at_ = Clock::now();
  upstream_pending_ = true;
  http::async_write(
      *up_, up_req_,
      net::bind_executor(client_.get_executor(), [self = shared_from_this()](boost::system::error_code ec, size_t) {
        self->upstream_pending_ = false;
        if (self->stopping_) return self->end_for_shutdown();
        if (ec) {
          if (self->timed_out_) return self->attempt_timed_out();
          return self->replica_died("write: " + ec.message());
        }
        self->read_upstream_header();
      }));
}

void ProxySession::read_upstream_header() {
  res_parser_.emplace();
  // (Not boost::none: Boost 1.74 compares a Content-Length against an empty
  // optional as "greater" and fails every sized body.)
  res_parser_->body_limit(std::numeric_limits<uint64_t>::max());
  upstream_pending_ = true;
  http::async_read_header(*up_, up_buf_, *res_parser_,
                          net::bind_executor(client_.get_executor(), [self = shared_from_this()](boost::system::error_code ec, size_t) {
                            self->upstream_pending_ = false;
                            if (self->stopping_) return self->end_for_shutdown();
                            self->on_upstream_header(ec);
                          }));
}

void ProxySession::on_upstream_header(boost::system::error_code ec) {
  if (ec && timed_out_) return attempt_timed_out();
  if (ec) return replica_died("read: " + ec.message());
  const auto& res = res_parser_->get();
  const int status = static_cast<int>(res.result_int());
  if (status / 100 == 1) {
    // 100 Continue is an interim answer, the real one follows (RFC 9110
    // section 15.2). Any other 1xx to a request that asked for no upgrade
    // (101 Switching Protocols above all: the connection would be HTTP no
    // more) is a broken answer, never relayed: the attempt fails.
    constexpr int kMaxInterimAnswers = 4;
    if (status == 100 && ++interim_answers_ <= kMaxInterimAnswers) return read_upstream_header();
    return attempt_failed(RetryReason::Reset, fmt::format("answered {} to a request without an upgrade", status));
  }
  const std::string ctype(res[http::field::content_type]);
  streaming_ = status / 100 == 2 && ctype.starts_with("text/event-stream");
  read_upstream_body();
}

void ProxySession::read_upstream_body() {
  auto& body = res_parser_->get().body();
  body.data = chunk_.data();
  body.size = chunk_.size();
  if (res_parser_->is_done()) return on_upstream_body({});
  upstream_pending_ = true;
  http::async_read_some(
      *up_, up_buf_, *res_parser_,
      net::bind_executor(client_.get_executor(), [self = shared_from_this()](boost::system::error_code ec, size_t) {
        self->upstream_pending_ = false;
        if (self->stopping_) return self->end_for_shutdown();
        self->on_upstream_body(ec);
      }));
}

void ProxySession::on_upstream_body(boost::system::error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  const size_t n = chunk_.size() - res_parser_->get().body().size;
  if (ec) {
    const std::string why = timed_out_ ? (started_ ? "the replica went silent" : "no answer within the TTFT timeout")
                                       : "read: " + ec.message();
    if (started_) {
      if (!timed_out_) request_died();  // (not retried either way: the client has its bytes)
      return stream_broken(why);
    }
    if (timed_out_) return attempt_timed_out();
    return replica_died(why);
  }
  if (streaming_) {
    if (n > 0) return relay(n);
    if (res_parser_->is_done()) return relay(0);
    return read_upstream_body();
  }
  body_.append(chunk_.data(), n);
  if (body_.size() > ctx_.opts.response_limit)
    return attempt_failed(RetryReason::Reset, "the response exceeds the gateway's response limit");
  if (!res_parser_->is_done()) return read_upstream_body();
  const auto& res = res_parser_->get();
  upstream_seconds_ = std::chrono::duration<double>(Clock::now() - sent_at_).count();
  on_answer(Answer{static_cast<int>(res.result_int()), std::move(body_), std::string(res[http::field::content_type]),
                   std::string(res[http::field::retry_after])});
}

void ProxySession::relay(size_t n) {
  arm_deadline(ctx_.opts.stream_idle_timeout);
  const bool done = res_parser_->is_done();
  std::string tapped;
  std::string_view bytes(chunk_.data(), n);
  if (usage_tap_) {  // whole events, the usage chunk read (and stripped when the gateway asked for it)
    tapped = usage_tap_->feed(bytes);
    if (done) tapped += usage_tap_->flush();
    if (usage_tap_->overflowed()) {
      const std::string why = fmt::format("an event longer than {} bytes", StreamUsageTap::kMaxEventBytes);
      return started_ ? stream_broken(why) : attempt_failed(RetryReason::Reset, why);
    }
    bytes = tapped;
  }
  if (started_ && bytes.empty() && !done) {
    // Nothing to write (the tap holds a partial event, or stripped one), so
    // no write would fail if the client left: look for its departure, or a
    // replica whose stream never completes an event outlives its client.
    if (peer_closed(client_.tcp())) return stream_client_gone();
    return stopping_ ? end_for_shutdown() : read_upstream_body();
  }
  out_.clear();
  if (!started_) {
    started_ = true;
    upstream_seconds_ = std::chrono::duration<double>(Clock::now() - sent_at_).count();
    const auto& res = res_parser_->get();
    out_ = fmt::format("HTTP/1.1 {} {}\r\n", res.result_int(), std::string(res.reason()));
    for (const auto& f : res)
      if (end_to_end(f.name()) && !(ctx_.cors.enabled() && cors_field(f.name())))
        out_ += fmt::format("{}: {}\r\n", std::string(f.name_string()), std::string(f.value()));
    out_ += cors_head_;
    out_ += chunked_ ? fmt::format("Transfer-Encoding: chunked\r\nConnection: {}\r\n\r\n",
                                   keep_alive_ ? "keep-alive" : "close")
                     : std::string("Connection: close\r\n\r\n");
    const double total = std::chrono::duration<double>(Clock::now() - received_).count();
    ctx_.metrics.added_latency().observe(std::max(0.0, total - upstream_seconds_));
  }
  if (!bytes.empty()) {
    if (chunked_) out_ += fmt::format("{:x}\r\n", bytes.size());
    out_ += bytes;
    if (chunked_) out_ += "\r\n";
    blank_line_last_ = bytes.ends_with("\n\n");
  }
  if (done && chunked_) out_ += "0\r\n\r\n";
  writing_ = true;
  net::async_write(client_, net::buffer(out_), [self = shared_from_this(), done](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    if (ec) return self->stream_client_gone();
    if (!done) return self->stopping_ ? self->end_for_shutdown() : self->read_upstream_body();
    const bool keep = self->res_parser_->keep_alive();
    if (self->usage_tap_) self->charge_usage(self->usage_tap_->usage());
    self->end_attempt(AttemptEnd::Healthy, keep);
    self->finish(Outcome::Success);
    self->log_request(200, "stream=1");
    if (self->keep_alive_ && !self->stopping_) return self->read_request();
    self->close_client();
  });
}

// The client went away: drop the replica's connection, which cancels its
// generation.
void ProxySession::stream_client_gone() {
  end_attempt(AttemptEnd::Healthy, false);
  finish(Outcome::ClientGone);
  log_request(200, "stream=1 client_gone=1");
  close_client();
}

void ProxySession::on_answer(Answer a) {
  if (retryable_status(a.status)) {
    RetryReason reason = RetryReason::Status5xx;
    if (a.status == 429) reason = RetryReason::QueueFull;
    if (a.status == 503 && a.body.find("server_shutting_down") != std::string::npos) {
      reason = RetryReason::Draining;
      replica_->draining.store(true);
    }
    const bool replica_fault = reason == RetryReason::Status5xx;
    end_attempt(replica_fault ? AttemptEnd::Failed : AttemptEnd::Healthy,
                up_ && res_parser_ && res_parser_->keep_alive());
    last_error_ = fmt::format("HTTP {}", a.status);
    last_answer_ = std::move(a);
    last_timed_out_ = false;
    return retry_or_give_up(reason);
  }
  end_attempt(AttemptEnd::Healthy, up_ && res_parser_ && res_parser_->keep_alive());
  const double total = std::chrono::duration<double>(Clock::now() - received_).count();
  ctx_.metrics.added_latency().observe(std::max(0.0, total - upstream_seconds_));
  if (tenant_ && a.status / 100 == 2) charge_usage(usage_of_body(a.body));
  finish(a.status / 100 == 2 ? Outcome::Success : Outcome::ClientError);
  respond(a.status, a.body, a.content_type.empty() ? "application/json" : a.content_type,
          a.retry_after.empty() ? "" : "Retry-After: " + a.retry_after + "\r\n");
}

void ProxySession::attempt_timed_out() {
  if (breaker_opened_)
    return attempt_failed(RetryReason::BreakerOpen,
                          "its circuit breaker opened while the request waited for the answer (it stopped answering)");
  attempt_failed(RetryReason::Timeout, "no answer within the TTFT timeout");
}

void ProxySession::attempt_failed(RetryReason reason, const std::string& detail, bool retry) {
  end_attempt(AttemptEnd::Failed, false);
  last_error_ = replica_->id + ": " + detail;
  last_timed_out_ = reason == RetryReason::Timeout;
  if (!retry) return give_up();
  retry_or_give_up(reason);
}

void ProxySession::end_attempt(AttemptEnd how, bool keep_connection) {
  deadline_armed_ = false;  // (its pending wait, if any, ends as a no-op; close_client() cancels it)
  if (!attempt_open_) return;
  attempt_open_ = false;
  const auto now = Clock::now();
  auto& m = ctx_.metrics.replica(replica_->index);
  if (how == AttemptEnd::Healthy) {
    replica_->breaker.record_success(now, probe_);
  } else {
    replica_->breaker.record_failure(now, probe_);
    m.attempt_failures->inc();
  }
  replica_->load.end_request();
  m.in_flight->set(replica_->load.in_flight());
  if (up_) {
    if (keep_connection && !timed_out_) {
      replica_->pool.give_back(std::move(up_));
    } else {
      boost::system::error_code ignored;
      up_->close(ignored);
      up_.reset();
    }
  }
  up_.reset();
  res_parser_.reset();
}

void ProxySession::retry_or_give_up(RetryReason reason) {
  const auto now = Clock::now();
  if (attempts_ >= ctx_.opts.retry.max_attempts) return give_up();
  if (!ctx_.budget.try_spend(now)) {
    ctx_.metrics.retry_budget_exhausted().inc();
    return give_up();
  }
  ctx_.metrics.retries(reason).inc();
  const auto wait = backoff_delay(attempts_, ctx_.opts.retry, rng_);
  backoff_.expires_after(wait);
  backoff_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->start_attempt();
  });
}

void ProxySession::give_up() {
  if (deaths_ > 0 && ctx_.qod.refused(request_fingerprint(), Clock::now())) return answer_query_of_death();
  finish(Outcome::UpstreamError);
  if (last_answer_) {
    const Answer a = *last_answer_;
    return respond(a.status, a.body, a.content_type.empty() ? "application/json" : a.content_type,
                   a.retry_after.empty() ? "" : "Retry-After: " + a.retry_after + "\r\n");
  }
  const int status = last_timed_out_ ? 504 : 502;
  respond(status, api_error_body(
                      status, fmt::format("No replica answered after {} attempt(s); last: {}", attempts_, last_error_),
                      last_timed_out_ ? "upstream_timeout" : "bad_gateway"));
}

void ProxySession::stream_broken(const std::string& why) {
  end_attempt(AttemptEnd::Failed, false);
  ctx_.metrics.replica(replica_->index).streams_broken->inc();
  const std::string event =
      server::sse_event(api_error_body(
          502, "The replica serving this stream failed (" + why + "); the stream is incomplete.", "replica_failed")) +
      std::string(server::kSseDone);
  const std::string payload = (blank_line_last_ ? "" : "\n\n") + event;
  out_ = chunked_ ? fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", payload.size(), payload) : payload;
  finish(Outcome::StreamBroken);
  log_request(200, "stream=1 broken=" + logfmt_value(why));
  write_client(true);
}

void ProxySession::finish(Outcome outcome) {
  if (!proxying_) return;
  proxying_ = false;
  outcome_ = outcome;
  ctx_.in_flight.fetch_sub(1);
  ctx_.metrics.in_flight().add(-1);
  release_tenant();
  if (replica_) ctx_.metrics.replica(replica_->index).requests[static_cast<size_t>(outcome)]->inc();
}

}  // namespace nexus::gateway
