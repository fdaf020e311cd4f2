// ProxySession's WebSocket failover (proxy_session.h, docs/gateway.md
// "WebSocket failover"). The relay watches each direction's frames: the
// client's events and the replica's go to the session's transcript
// (ws_transcript.h). When the replica's connection ends without a close
// frame (killed, crashed, reset), and the client is not closing:
//   1. the client gets the transcript's death notice (realtime: a
//      `response.done` with finish_reason `error` for a response that was
//      running, and an `error` event `replica_failed` saying the session
//      moves; Responses: a `response.failed` for a running response);
//   2. a new session is opened on another replica (the upgrade is the
//      gateway's own; routed, retried and bounded as the first one);
//   3. the client gets what the new replica sent with its 101 (realtime's
//      `session.created`, its new id), and the replica gets the
//      transcript's replay (realtime: settings, the conversation as
//      input.append events, the turn the client had asked for and not yet
//      got; Responses: the requests not answered yet), then the client's
//      events from there on (a Responses transcript rewrites those that
//      continue the dead replica's last response, so from the move on each
//      client message is re-encoded whole).
// The client's events read between the death and the replay are in the
// transcript, so they are replayed, not forwarded; a client message cut
// in the middle by the death is re-encoded whole once it has arrived.
// Without another replica, with a transcript the gateway could not keep,
// or after kMaxFailovers moves, the client gets an `error` event and a
// close frame (1011) instead; so it does, with `query_of_death`, when the
// new replica dies too before it answered anything past the replay, or
// when the client sends a message known to kill replicas
// (proxy_query_of_death.cpp).
#include <fmt/format.h>

#include <utility>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <nlohmann/json.hpp>

#include "gateway/proxy_session.h"

namespace nexus::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;

namespace {

constexpr int kMaxFailovers = 3;  // per session: a conversation that kills replicas stops moving
constexpr const char* kRefusedMessage =
    "This message was in flight on two replicas that both failed; the gateway does not send it to a replica for a "
    "while, and ends the session. Start a new session.";

std::string text_frames(const std::vector<std::string>& events) {
  std::string out;
  for (const auto& e : events) out += encode_ws_frame(WsOpcode::Text, e);
  return out;
}


}  // namespace

bool ProxySession::observe_client(std::string_view bytes) {
  up_out_.clear();
  size_t raw_from = skip_partial_ || reencode_client_ ? std::string_view::npos : 0;
  bool dropped = false;  // a message re-encoding cannot carry (past the frame reader's limit)
  const bool ok = client_frames_->feed(bytes, [&](WsMessage& m, size_t end) {
    if (message_refused_) return;
    std::optional<std::string> rewritten;
    if (m.opcode == WsOpcode::Text) {
      if (m.too_large) {
        transcript_->mark_lost();
      } else if (!admit_client_message(m.payload)) {
        message_refused_ = true;
        return;
      } else {
        rewritten = transcript_->on_client_event(m.payload);
      }
    } else if (m.opcode == WsOpcode::Close) {
      transcript_->set_closing();
    }
    if (raw_from != std::string_view::npos) return;
    // Re-encoded whole: the message the replica's death cut, or, after a
    // move where the transcript rewrites, every message.
    if (!m.too_large) up_out_ += encode_ws_frame(m.opcode, rewritten ? *rewritten : m.payload, static_cast<uint32_t>(rng_()));
    else dropped = true;
    if (client_frames_->at_message_boundary() && !reencode_client_) {
      raw_from = end;
      skip_partial_ = false;
    }
  });
  if (message_refused_) {  // nothing of these bytes reaches the replica (the message's last frame is here)
    up_out_.clear();
    return false;
  }
  if (!ok) transcript_->mark_lost();
  if ((dropped || !ok) && reencode_client_) {
    // Nothing would answer it (re-encoding carries whole messages only):
    // the session ends, as a refused message does.
    up_out_.clear();
    message_refused_ = true;
    refusal_ = ok ? ClientRefusal::TooLarge : ClientRefusal::BadFrames;
    return false;
  }
  if (!replayed_) {  // the replay to come carries these events
    up_out_.clear();
    return true;
  }
  if (raw_from != std::string_view::npos) up_out_.append(bytes.substr(raw_from));
  return true;
}

void ProxySession::observe_replica(std::string_view bytes) {
  const bool ok = replica_frames_->feed(bytes, [&](WsMessage& m, size_t) {
    if (m.opcode == WsOpcode::Text) {
      const std::string type = m.too_large ? std::string() : transcript_->on_server_event(m.payload);
      // A response's end carries its usage: the tenant's tokens (--api-keys),
      // as an HTTP request's are counted.
      if (tenant_ && (type == "response.done" || type == "response.completed" || type == "response.incomplete" ||
                      type == "response.failed"))
        charge_usage(usage_of_body(m.payload));
      // What the replica was sent before its message is no longer in flight
      // (query_of_death.h), except that a new replica acknowledges the
      // replay's session (session.created, session.updated) before it reads
      // the replay's other events.
      if (!replay_unanswered_ || !transcript_->acknowledges_replay(type)) {
        in_flight_messages_.clear();
        replayed_messages_.clear();
        replay_unanswered_ = false;
      }
    } else if (m.opcode == WsOpcode::Close) {
      replica_closed_ = true;
    }
  });
  if (!ok) transcript_->mark_lost();
}

void ProxySession::upstream_lost(const std::string& detail) {
  if (!tunnel_ || failing_over_) return;
  ++up_gen_;
  up_live_ = false;
  boost::system::error_code ignored;
  up_->close(ignored);
  dead_up_ = std::move(up_);
  // An orderly end (the replica's close frame has reached the client), the
  // client's own close, or a half-sent frame to the client (nothing more
  // can be written to it as WebSocket): the tunnel ends.
  if (replica_closed_ || transcript_->closing() || !replica_frames_->at_message_boundary())
    return end_tunnel_from_replica();
  const bool cut = std::exchange(breaker_cut_, false);  // watch_tunnel() closed it
  const std::string why = cut ? "it stopped answering: its circuit breaker opened" : detail;
  std::string notice = text_frames(transcript_->death_notice(false, why));
  if (message_refused_) {  // the gateway cut the replica off (refuse_client_message): not its failure
    out_ = std::move(notice);
    return end_refused_session();
  }
  replica_->breaker.record_failure(Clock::now(), false);
  ctx_.metrics.replica(replica_->index).attempt_failures->inc();
  last_error_ = replica_->id + ": " + why;
  if (ctx_.opts.log)
    ctx_.opts.log(fmt::format("{} session: replica {} failed ({})", ws_protocol_name(ws_protocol_), replica_->id, why));
  if (cut) {  // a frozen replica: not the messages' doing
    in_flight_messages_.clear();
    replayed_messages_.clear();
    replay_unanswered_ = false;
  } else if (session_killed_two_replicas()) {
    ctx_.metrics.ws_failovers(ws_protocol_, false).inc();
    out_ = std::move(notice);
    return end_session("query_of_death",
                       fmt::format("The replica serving this session failed ({}), as the one before it did, with the "
                                   "same messages in flight; the session is not moved again. Messages that killed "
                                   "two replicas are refused for a while.",
                                   why));
  }
  if (transcript_->lost() || failovers_ >= kMaxFailovers) {
    ctx_.metrics.ws_failovers(ws_protocol_, false).inc();
    out_ = std::move(notice);
    return end_session("replica_failed",
                       fmt::format("The replica serving this session failed ({}); the session cannot be moved to "
                                   "another replica. Start a new session.",
                                   why));
  }
  notice = text_frames(transcript_->death_notice(true, why));
  failing_over_ = true;
  replayed_ = false;
  out_ = std::move(notice);
  writing_ = true;
  net::async_write(client_, net::buffer(out_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    if (self->stopping_ || ec || !self->tunnel_) return self->end_tunnel();
    self->attempts_ = 0;
    std::fill(self->tried_.begin(), self->tried_.end(), false);
    self->tried_[self->replica_->index] = true;
    self->ws_attempt();
  });
}

void ProxySession::failover_connected() {
  disarm_deadline();
  replica_->breaker.record_success(Clock::now(), probe_);
  if (message_refused_) {  // a refused message came meanwhile: nothing is replayed
    boost::system::error_code ignored;
    up_->close(ignored);
    ctx_.metrics.ws_failovers(ws_protocol_, false).inc();
    failing_over_ = false;
    out_.clear();
    return end_refused_session();
  }
  ctx_.metrics.replica(replica_->index).ws_sessions[static_cast<size_t>(ws_protocol_)]->inc();
  ctx_.metrics.ws_failovers(ws_protocol_, true).inc();
  ++failovers_;
  failing_over_ = false;
  // The new session's session.created (read with the 101) goes to the client.
  const std::string frames = beast::buffers_to_string(up_buf_.data());
  up_buf_.clear();
  replica_frames_.emplace(WsTranscript::kMaxServerMessage);
  replica_closed_ = false;
  replay_unanswered_ = true;
  last_forward_at_ = Clock::now();
  observe_replica(frames);
  // The replay: the transcript as client events, masked as a client's.
  const std::vector<std::string> events = transcript_->replay();
  replay_out_.clear();
  for (const auto& e : events) replay_out_ += encode_ws_frame(WsOpcode::Text, e, static_cast<uint32_t>(rng_()));
  replayed_ = true;
  skip_partial_ = !client_frames_->at_message_boundary();
  reencode_client_ = transcript_->rewrites_after_move();
  held_.clear();
  if (ctx_.opts.log)
    ctx_.opts.log(fmt::format("{} session moved to replica {} ({} events replayed)", ws_protocol_name(ws_protocol_),
                              replica_->id, events.size()));
  out_ = frames;
  writing_ = true;
  net::async_write(client_, net::buffer(out_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    if (self->stopping_ || ec || !self->tunnel_) return self->end_tunnel();
    self->relay_to_client();
  });
  const uint64_t gen = up_gen_;
  net::async_write(*up_, net::buffer(replay_out_),
                   net::bind_executor(client_.get_executor(), [self = shared_from_this(), gen](boost::system::error_code ec, size_t) {
                     if (gen != self->up_gen_ || !self->tunnel_) return;
                     boost::system::error_code ignored;
                     if (ec) return self->up_->close(ignored);  // its read fails into upstream_lost()
                     self->up_live_ = true;
                     if (!self->client_parked_) return;  // the client's pending read goes on
                     self->client_parked_ = false;
                     if (self->held_.empty()) return self->relay_to_replica();
                     self->up_out_ = std::move(self->held_);
                     self->held_.clear();
                     self->write_to_replica();
                   }));
}

void ProxySession::failover_failed() {
  ctx_.metrics.ws_failovers(ws_protocol_, false).inc();
  failing_over_ = false;
  out_.clear();
  end_session("no_replica_available",
              fmt::format("No replica could take the session over (last: {}). Start a new session.", last_error_));
}

void ProxySession::end_refused_session() {
  switch (refusal_) {
    case ClientRefusal::QueryOfDeath: return end_session("query_of_death", kRefusedMessage);
    case ClientRefusal::TooLarge:
      return end_session("message_too_large",
                         fmt::format("A message over the gateway's limit of {} bytes came after the connection moved "
                                     "to another replica; the gateway cannot pass it on. Start a new connection.",
                                     ctx_.opts.body_limit),
                         1009);
    case ClientRefusal::BadFrames:
      return end_session("protocol_error", "The client's WebSocket frames could not be read (RFC 6455 framing).",
                         1002);
  }
}

void ProxySession::end_session(const std::string& code, const std::string& message, uint16_t close_code) {
  // 1011: the replicas failed; 1002 / 1009: the client's frames or message (RFC 6455 7.4.1).
  const bool client_fault = close_code != 1011;
  out_ += encode_ws_frame(WsOpcode::Text, transcript_->error_event(code, message, client_fault));
  out_ += encode_ws_close(close_code, close_code == 1002   ? "protocol error"
                                     : close_code == 1009 ? "message too big"
                                                          : "replica failed");
  writing_ = true;
  net::async_write(client_, net::buffer(out_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    if (ec || self->client_.tls()) return self->end_tunnel_from_replica();  // TLS: close_notify
    // The closing handshake (RFC 6455 7.1.1): our FIN after the close frame,
    // so the client reads both; its answer or EOF, or a second, ends it.
    boost::system::error_code ignored;
    self->client_.tcp().shutdown(Socket::shutdown_send, ignored);
    self->client_timer_.expires_after(std::chrono::seconds(1));
    self->client_timer_.async_wait([self](boost::system::error_code ec) {
      if (!ec) self->end_tunnel();
    });
  });
}

void ProxySession::watch_tunnel() {
  tunnel_watch_.expires_after(std::chrono::milliseconds(250));
  tunnel_watch_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || !self->tunnel_) return;
    if (self->up_live_ && !self->failing_over_ && self->up_ &&
        self->replica_->breaker.state() == BreakerState::Open) {
      self->breaker_cut_ = true;
      boost::system::error_code ignored;
      self->up_->close(ignored);  // relay_to_client's read fails into upstream_lost()
    }
    self->watch_tunnel();
  });
}

}  // namespace nexus::gateway
