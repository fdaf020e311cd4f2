// ProxySession's WebSocket relay (proxy_session.h): GET /v1/realtime
// sessions and the Responses API's WebSocket mode (GET /v1/responses with
// an Upgrade). The upgrade request goes to one replica (chosen as
// any attempt is, without a prefix), over a connection of its own (never
// pooled); once it answers 101 the gateway relays the 101 and then the
// bytes in both directions as each read brings them; the frames are
// watched on the way (ws_frames.h) to keep the session's transcript
// (ws_transcript.h: realtime_transcript.h, responses_transcript.h), never
// held back. The session sticks to that
// replica while it lives. A connect error or a replica that does not answer
// the upgrade within --connect-timeout-ms is retried on another replica
// (within the retry budget); any other answer (4xx, 503 draining, ...) is
// relayed. When the client closes, or the replica closes with a close
// frame, both connections close; a replica that dies (its connection ends
// without a close frame) moves the session to another replica
// (proxy_websocket_failover.cpp).
#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "gateway/proxy_http.h"
#include "gateway/proxy_session.h"
#include "gateway/realtime_transcript.h"
#include "gateway/responses_transcript.h"

namespace nexus::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// RFC 6455 4.1: a random 16-byte nonce, base64-encoded.
std::string websocket_key(std::mt19937_64& rng) {
  std::array<unsigned char, 16> nonce{};
  for (size_t i = 0; i < nonce.size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(nonce.data() + i, &r, 8);
  }
  std::array<unsigned char, 25> out{};  // 4 * ceil(16 / 3) + NUL
  EVP_EncodeBlock(out.data(), nonce.data(), static_cast<int>(nonce.size()));
  return std::string(reinterpret_cast<const char*>(out.data()));
}

}  // namespace

void ProxySession::start_ws_relay(WsProtocol protocol) {
  ws_protocol_ = protocol;
  if (protocol == WsProtocol::Responses) transcript_ = std::make_unique<ResponsesTranscript>();
  else transcript_ = std::make_unique<RealtimeTranscript>();
  reencode_client_ = false;
  in_flight_messages_.clear();
  replayed_messages_.clear();
  replay_unanswered_ = false;
  message_refused_ = false;
  refusal_ = ClientRefusal::QueryOfDeath;
  breaker_cut_ = false;
  client_frames_.emplace(ctx_.opts.body_limit);
  replica_frames_.emplace(WsTranscript::kMaxServerMessage);
  attempts_ = 0;
  std::fill(tried_.begin(), tried_.end(), false);
  last_error_.clear();
  ws_attempt();
}

void ProxySession::ws_attempt() {
  const auto now = Clock::now();
  replica_ = nullptr;
  for (size_t pass = 0; pass < ctx_.replicas.size() && !replica_; ++pass) {
    std::vector<Candidate> candidates;
    for (auto& r : ctx_.replicas)
      if (r->available(now) && !tried_[r->index]) candidates.push_back(Candidate{r->index, r->load.score()});
    if (candidates.empty()) break;
    const RouteDecision d = ctx_.router.choose(candidates, {});
    tried_[d.replica] = true;
    const Admission a = ctx_.replicas[d.replica]->breaker.try_acquire(now);
    if (a == Admission::Denied) continue;
    replica_ = ctx_.replicas[d.replica].get();
    probe_ = a == Admission::Probe;
  }
  if (!replica_ && failing_over_) return failover_failed();
  if (!replica_) {
    keep_alive_ = false;
    if (!last_error_.empty())
      return respond(502, api_error_body(502, fmt::format("No replica took the {} session after {} attempt(s); "
                                                          "last: {}", ws_protocol_name(ws_protocol_), attempts_,
                                                          last_error_),
                                         "bad_gateway"));
    ctx_.metrics.no_replica_requests().inc();
    return respond(503, api_error_body(503, "No replica is available to take the session.", "no_replica_available"),
                   "application/json", "Retry-After: 1\r\n");
  }
  ++attempts_;
  ctx_.metrics.replica(replica_->index).routed->inc();
  timed_out_ = false;
  up_buf_.clear();
  up_ = replica_->pool.fresh();
  ++up_gen_;
  // Connect and the 101 answer are bounded together.
  arm_deadline(ctx_.opts.connect_timeout);
  upstream_pending_ = true;
  net::async_connect(
      *up_, replica_->pool.endpoints(),
      net::bind_executor(client_.get_executor(), [self = shared_from_this()](boost::system::error_code ec, const auto&) {
        self->upstream_pending_ = false;
        if (self->stopping_) return self->end_for_shutdown();
        if (ec) return self->ws_attempt_failed(self->timed_out_ ? "no answer within the connect timeout" : "connect: " + ec.message());
        boost::system::error_code ignored;
        self->up_->set_option(net::ip::tcp::no_delay(true), ignored);
        self->write_ws_upgrade();
      }));
}

void ProxySession::write_ws_upgrade() {
  // The handshake's own headers (Connection, Upgrade, Sec-WebSocket-*) go
  // through: the replica answers the handshake. Extensions do not: the
  // frames must stay readable (permessage-deflate would hide them). A
  // failover's handshake is the gateway's own, with its own key.
  const bool own_key = begin_upstream_request();
  for (const auto& f : req_)
    if (f.name() != http::field::host && f.name() != http::field::content_length &&
        f.name() != http::field::sec_websocket_extensions &&
        !(failing_over_ && f.name() == http::field::sec_websocket_key) &&
        !(own_key && client_credential(f)))
      up_req_.insert(f.name_string(), f.value());
  if (failing_over_) up_req_.set(http::field::sec_websocket_key, websocket_key(rng_));
  if (!ctx_.opts.replica_api_key.empty()) up_req_.set(http::field::authorization, "Bearer " + ctx_.opts.replica_api_key);
  up_req_.set(http::field::host, replica_->id);
  upstream_pending_ = true;
  http::async_write(
      *up_, up_req_,
      net::bind_executor(client_.get_executor(), [self = shared_from_this()](boost::system::error_code ec, size_t) {
        self->upstream_pending_ = false;
        if (self->stopping_) return self->end_for_shutdown();
        if (ec) return self->ws_attempt_failed("write: " + ec.message());
        self->ws_parser_.emplace();
        self->ws_parser_->body_limit(64 * 1024);
        self->upstream_pending_ = true;
        http::async_read_header(
            *self->up_, self->up_buf_, *self->ws_parser_,
            net::bind_executor(self->client_.get_executor(), [self](boost::system::error_code ec, size_t) {
              self->upstream_pending_ = false;
              if (self->stopping_) return self->end_for_shutdown();
              self->on_ws_header(ec);
            }));
      }));
}

void ProxySession::ws_attempt_failed(const std::string& detail) {
  disarm_deadline();
  replica_->breaker.record_failure(Clock::now(), probe_);
  ctx_.metrics.replica(replica_->index).attempt_failures->inc();
  boost::system::error_code ignored;
  if (up_) up_->close(ignored);
  up_.reset();
  last_error_ = replica_->id + ": " + detail;
  if (attempts_ < ctx_.opts.retry.max_attempts && ctx_.budget.try_spend(Clock::now())) {
    ctx_.metrics.retries(timed_out_ ? RetryReason::Timeout : RetryReason::Connect).inc();
    return ws_attempt();
  }
  ws_attempts_exhausted();
}

void ProxySession::ws_attempts_exhausted() {
  std::fill(tried_.begin(), tried_.end(), true);  // no replica left: ws_attempt() answers 502
  ws_attempt();
}

void ProxySession::on_ws_header(boost::system::error_code ec) {
  if (ec) return ws_attempt_failed(timed_out_ ? "no answer within the connect timeout" : "read: " + ec.message());
  const auto& res = ws_parser_->get();
  const int status = static_cast<int>(res.result_int());
  if (failing_over_) {
    if (status != 101) return ws_attempt_failed(fmt::format("answered {} to the upgrade", status));
    return failover_connected();
  }
  if (status != 101) {
    // Not upgraded: relay the answer (read whole), then close.
    upstream_pending_ = true;
    return http::async_read(
        *up_, up_buf_, *ws_parser_,
        net::bind_executor(client_.get_executor(), [self = shared_from_this(), status](boost::system::error_code ec, size_t) {
          self->upstream_pending_ = false;
          if (self->stopping_) return self->end_for_shutdown();
          if (ec) return self->ws_attempt_failed("read: " + ec.message());
          self->disarm_deadline();
          const auto now = Clock::now();
          if (status >= 500) self->replica_->breaker.record_failure(now, self->probe_);
          else self->replica_->breaker.record_success(now, self->probe_);
          boost::system::error_code ignored;
          self->up_->close(ignored);
          const auto& r = self->ws_parser_->get();
          self->keep_alive_ = false;
          const std::string retry_after(r[http::field::retry_after]);
          self->respond(status, r.body(), r[http::field::content_type].empty() ? "application/json" : std::string(r[http::field::content_type]),
                        retry_after.empty() ? "" : "Retry-After: " + retry_after + "\r\n");
        }));
  }
  disarm_deadline();
  replica_->breaker.record_success(Clock::now(), probe_);
  out_ = "HTTP/1.1 101 Switching Protocols\r\n";
  for (const auto& f : res)
    out_ += fmt::format("{}: {}\r\n", std::string(f.name_string()), std::string(f.value()));
  out_ += "\r\n";
  // Frames the replica sent right after its 101 (session.created) were read
  // with the header: they go first.
  const std::string frames = beast::buffers_to_string(up_buf_.data());
  up_buf_.clear();
  out_ += frames;
  tunnel_ = true;
  up_live_ = true;
  watch_tunnel();
  observe_replica(frames);
  ctx_.metrics.replica(replica_->index).ws_sessions[static_cast<size_t>(ws_protocol_)]->inc();
  ctx_.metrics.ws_active(ws_protocol_).add(1);
  log_request(101, fmt::format("websocket={}", ws_protocol_name(ws_protocol_)));
  writing_ = true;
  net::async_write(client_, net::buffer(out_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    if (ec || !self->tunnel_) return self->end_tunnel();
    self->relay_to_client();
    // Bytes the client sent past its upgrade request (it should wait for
    // the 101, RFC 6455 4.1) go first.
    const std::string early = beast::buffers_to_string(self->client_buf_.data());
    self->client_buf_.clear();
    if (early.empty()) return self->relay_to_replica();
    if (!self->observe_client(early)) return self->refuse_client_message();
    self->write_to_replica();
  });
}

void ProxySession::relay_to_client() {
  const uint64_t gen = up_gen_;
  up_->async_read_some(
      net::buffer(chunk_),
      net::bind_executor(client_.get_executor(), [self = shared_from_this(), gen](boost::system::error_code ec, size_t n) {
        if (gen != self->up_gen_) return;  // an earlier upstream's read
        if (!self->tunnel_) return self->end_tunnel_from_replica();
        if (ec) return self->upstream_lost("read: " + ec.message());
        self->out_.assign(self->chunk_.data(), n);
        self->observe_replica(self->out_);
        net::async_write(self->client_, net::buffer(self->out_), [self](boost::system::error_code ec, size_t) {
          if (ec || !self->tunnel_) return self->end_tunnel();
          self->relay_to_client();
        });
      }));
}

void ProxySession::relay_to_replica() {
  to_replica_.resize(16 * 1024);
  client_reading_ = true;
  client_.async_read_some(net::buffer(to_replica_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
    self->client_reading_ = false;
    if (self->tls_goodbye_) return self->tls_goodbye();
    if (ec == net::error::eof && self->client_.tls() && self->tunnel_ && self->up_) {
      // The client's close_notify (its WebSocket close is done) came before
      // the replica's TCP close: end the replica's side, whose read then
      // fails into end_tunnel_from_replica(), which answers with ours.
      self->transcript_->set_closing();
      boost::system::error_code ignored;
      self->up_->close(ignored);
      return;
    }
    if (ec || !self->tunnel_) return self->end_tunnel();
    if (!self->observe_client(std::string_view(self->to_replica_.data(), n))) return self->refuse_client_message();
    if (!self->up_live_) {  // a failover is under way: what to forward waits for its replay
      self->held_ += self->up_out_;
      self->client_parked_ = true;
      return;
    }
    self->write_to_replica();
  });
}

void ProxySession::write_to_replica() {
  const uint64_t gen = up_gen_;
  net::async_write(*up_, net::buffer(up_out_),
                   net::bind_executor(client_.get_executor(), [self = shared_from_this(), gen](boost::system::error_code ec, size_t) {
                     if (!self->tunnel_) return self->end_tunnel();
                     if (gen == self->up_gen_ && !ec) return self->relay_to_replica();
                     if (gen != self->up_gen_ && self->up_live_) return self->relay_to_replica();  // moved meanwhile
                     // The replica is gone: its read side fails into
                     // upstream_lost(), whose failover resumes this loop.
                     boost::system::error_code ignored;
                     if (gen == self->up_gen_) self->up_->close(ignored);
                     self->client_parked_ = true;
                   }));
}

void ProxySession::end_tunnel() {
  if (!tunnel_) return;
  tunnel_ = false;
  tunnel_watch_.cancel();
  ctx_.metrics.ws_active(ws_protocol_).add(-1);
  boost::system::error_code ignored;
  if (up_) up_->close(ignored);
  close_client();
}

// The replica closed (or failed) first, or the client's close_notify made
// us close it; whatever it sent (its close frame) has reached the client. A TLS client then gets close_notify rather than a
// bare TCP close, once the pending read of its bytes is cancelled (an SSL
// stream runs one read at a time; the shutdown reads too).
void ProxySession::end_tunnel_from_replica() {
  if (!client_.tls() || !tunnel_) return end_tunnel();
  tunnel_ = false;
  tunnel_watch_.cancel();
  ctx_.metrics.ws_active(ws_protocol_).add(-1);
  boost::system::error_code ignored;
  if (up_) up_->close(ignored);
  if (!client_reading_) return tls_goodbye();
  tls_goodbye_ = true;
  client_.tcp().cancel(ignored);  // the read's handler calls tls_goodbye()
}

void ProxySession::tls_goodbye() {
  tls_goodbye_ = false;
  client_timer_.expires_after(std::chrono::seconds(1));  // a client that never answers close_notify
  client_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->close_client();
  });
  client_.async_shutdown([self = shared_from_this()](boost::system::error_code) { self->close_client(); });
}

}  // namespace nexus::gateway
