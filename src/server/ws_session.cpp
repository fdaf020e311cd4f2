#include "server/ws_session.h"

#include <atomic>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "server/crash_fault.h"
#include "server/ws_frames.h"

namespace nexus::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kReadChunk = 64 << 10;   // bytes per read of a message
constexpr size_t kDrainChunk = 64 << 10;  // bytes per read while lingering

std::atomic<uint64_t> g_next_session{1};

}  // namespace

uint64_t next_engine_session() { return g_next_session.fetch_add(1, std::memory_order_relaxed); }

void WsRelay::deliver(const GenerationEvent& ev) {
  std::lock_guard lock(gate_->mu);
  if (!gate_->open || !session_) return;
  // The final event hands the reference to the posted handler, so the
  // engine thread never destroys a session.
  std::shared_ptr<WsSession> s = ev.done ? std::move(session_) : session_;
  auto ex = s->executor();
  net::post(ex, [s = std::move(s), ev] { s->on_engine_event(ev); });
}

void WsRelay::detach() {
  std::lock_guard lock(gate_->mu);
  session_.reset();
}

WsSession::WsSession(tcp::socket socket, ServerContext& ctx)
    : ctx_(ctx),
      backend_(ctx.router.backend()),
      registration_{ctx, this},
      ws_(std::move(socket)),
      refused_input_(ctx.opts.body_limit),
      timer_(ws_.get_executor()) {}

WsSession::~WsSession() = default;

WsSession::Registration::~Registration() {
  std::lock_guard lock(ctx.mu);
  ctx.ws_sessions.erase(self);
  ctx.cv.notify_all();
}

void WsSession::start(http::request<http::string_body> req) {
  {
    std::lock_guard lock(ctx_.mu);
    ctx_.ws_sessions.emplace(this, weak_from_this());
  }
  websocket::stream_base::timeout t{};
  t.handshake_timeout = std::chrono::seconds(30);
  // Beast pings after half the idle timeout of silence and gives up at the
  // full timeout.
  t.idle_timeout = 2 * ctx_.opts.ws_ping_interval;
  t.keep_alive_pings = true;
  ws_.set_option(t);
  const std::string selected = subprotocol(req);
  ws_.set_option(websocket::stream_base::decorator([selected](websocket::response_type& r) {
    r.set(http::field::server, "nexus");
    if (!selected.empty()) r.set(http::field::sec_websocket_protocol, selected);
  }));
  ws_.read_message_max(0);  // no limit: on_read enforces body_limit
  beast::get_lowest_layer(ws_).expires_never();  // the websocket timeouts apply instead
  // accept() builds the 101 response from `req` before it returns control,
  // but keep the request alive until the handler runs all the same.
  auto held = std::make_shared<http::request<http::string_body>>(std::move(req));
  ws_.async_accept(*held, [self = shared_from_this(), held](beast::error_code ec) { self->on_accept(ec); });
}

void WsSession::shutdown() {
  net::post(executor(), [self = shared_from_this()] {
    if (self->lingering_) return self->end_linger();
    // The server is going away: no final event will be waited for.
    self->on_shutdown();
    if (!self->accepted_ || self->failed_ || self->closing_) return self->fail();
    // Say why, then close with 1001, "going away" (RFC 6455, section 7.4.1).
    self->send(self->error_message("server_shutting_down",
                                   "The server is stopping; open a session on another replica."));
    self->close_code_ = websocket::close_code::going_away;
    self->close_after_output_ = true;
    if (!self->writing_) self->begin_close();
  });
}

void WsSession::on_accept(beast::error_code ec) {
  if (ec) return fail();
  accepted_ = true;
  on_open();
  do_read();
}

void WsSession::do_read() {
  if (failed_ || cut_off_ || hold_) return;
  if (const auto wait = refused_input_.wait_before_read(std::chrono::steady_clock::now()); wait.count() > 0) {
    timer_.expires_after(wait);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->closing_) self->do_read();  // a close under way reads for itself
    });
    return;
  }
  ws_.async_read_some(rbuf_, kReadChunk,
                      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_read(ec, n); });
}

void WsSession::resume_reading() {
  hold_ = false;
  do_read();
}

void WsSession::on_read(beast::error_code ec, size_t n) {
  if (failed_) return;
  // Closed by the peer, a ping unanswered, a reset: the session ends.
  if (ec) return fail();
  refused_input_.on_read(n);
  // The message limit is ours, not Beast's read_message_max: Beast 1.74
  // closes the socket without draining what the peer still sends, which
  // resets the connection and can destroy the close frame before the peer
  // reads it. An oversized message is refused once it passes the limit, the
  // rest of it discarded as it comes (and counted as refused), and the
  // session goes on.
  if (oversized_) {
    rbuf_.consume(rbuf_.size());
    if (refused_input_.refuse(std::chrono::steady_clock::now())) cut_off();
  } else if (rbuf_.size() > ctx_.opts.body_limit) {
    oversized_ = true;
    rbuf_.consume(rbuf_.size());
    refuse(error_message("message_too_large",
                         fmt::format("A message exceeds the limit of {} bytes.", ctx_.opts.body_limit)));
  }
  if (!ws_.is_message_done()) return do_read();
  refused_input_.end_message();
  if (oversized_) {
    // Refused above.
  } else if (!ws_.got_text()) {
    refuse(error_message("binary_not_supported", "Binary messages are not supported; send JSON text."));
  } else if (!close_after_output_) {
    const auto data = rbuf_.cdata();
    const std::string_view text(static_cast<const char*>(data.data()), data.size());
    crash_if_faulty(text);  // (tests only: crash_fault.h)
    on_text(text);
  }
  oversized_ = false;
  rbuf_.consume(rbuf_.size());
  rbuf_.shrink_to_fit();  // an idle session holds no read buffer
  do_read();
}

void WsSession::refuse(std::string error) {
  send(std::move(error));
  if (refused_input_.refuse(std::chrono::steady_clock::now())) cut_off();
}

void WsSession::cut_off() {
  if (cut_off_ || failed_) return;
  cut_off_ = true;  // do_read() reads no more
  ctx_.realtime_cut_off.fetch_add(1, std::memory_order_relaxed);
  if (ctx_.opts.log)
    ctx_.opts.log(fmt::format("WebSocket session cut off: {:.0f} bytes of refused messages (input_flood, 1008)",
                              refused_input_.refused()));
  send(error_message("input_flood",
                     fmt::format("This session sent {:.0f} bytes of messages that were refused, over the limit of "
                                 "{} (forgotten at {} bytes a minute): it is closed (1008). Open a new session.",
                                 refused_input_.refused(), refused_input_.budget(), ctx_.opts.body_limit)));
  close_code_ = websocket::close_code::policy_error;
  close_after_output_ = true;
  if (on_closing()) return;  // its response's end goes out first, then the close
  if (!writing_ && !busy()) begin_close();
}

void WsSession::close_when_done() {
  close_after_output_ = true;
  if (on_closing()) return;
  if (!writing_ && !busy()) begin_close();
}

void WsSession::after_response() {
  if (close_after_output_ && !writing_ && !busy()) begin_close();
}

void WsSession::send(std::string msg) {
  if (failed_ || closing_) return;
  // A peer that sends but never reads would grow the queue without bound.
  if (out_bytes_ + msg.size() > 2 * ctx_.opts.max_pending_bytes) return fail();
  out_bytes_ += msg.size();
  out_.push_back(std::move(msg));
  if (out_bytes_ > ctx_.opts.max_pending_bytes) on_backlog();
  if (!writing_) do_write();
}

void WsSession::do_write() {
  writing_ = true;
  ws_.text(true);
  ws_.async_write(net::buffer(out_.front()),
                  [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void WsSession::on_write(beast::error_code ec) {
  writing_ = false;
  if (failed_) return;
  if (ec) return fail();
  out_bytes_ -= out_.front().size();
  out_.pop_front();
  if (!out_.empty()) return do_write();
  after_response();
}

void WsSession::begin_close() {
  if (closing_ || failed_) return;
  if (cut_off_) return linger_close();
  closing_ = true;
  ws_.async_close(close_code_, [self = shared_from_this()](beast::error_code) {
    self->closing_ = false;
    self->fail();
  });
}

void WsSession::linger_close() {
  closing_ = true;
  lingering_ = true;
  // Beast's idle timer would write pings; the stream is not used again.
  websocket::stream_base::timeout none{};
  none.handshake_timeout = websocket::stream_base::none();
  none.idle_timeout = websocket::stream_base::none();
  none.keep_alive_pings = false;
  ws_.set_option(none);
  auto frame = std::make_shared<const std::string>(encode_ws_close(static_cast<uint16_t>(close_code_), "input flood"));
  net::async_write(beast::get_lowest_layer(ws_).socket(), net::buffer(*frame),
                   [self = shared_from_this(), frame](beast::error_code ec, size_t) {
                     if (!self->lingering_) return;
                     if (ec) return self->end_linger();
                     beast::error_code ignored;
                     beast::get_lowest_layer(self->ws_).socket().shutdown(tcp::socket::shutdown_send, ignored);
                     self->timer_.expires_after(kLingerTime);
                     self->timer_.async_wait([self](beast::error_code e) {
                       if (!e && self->lingering_) self->end_linger();
                     });
                     self->drain_buf_ = std::make_unique_for_overwrite<char[]>(kDrainChunk);
                     self->linger_read();
                   });
}

void WsSession::linger_read() {
  beast::get_lowest_layer(ws_).socket().async_read_some(
      net::buffer(drain_buf_.get(), kDrainChunk),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_linger_read(ec, n); });
}

void WsSession::on_linger_read(beast::error_code ec, size_t n) {
  if (!lingering_) return;
  drained_ += n;
  // The peer's EOF (it read the close frame), an error, or enough drained.
  if (ec || drained_ >= kLingerMaxDrain) return end_linger();
  linger_read();
}

void WsSession::end_linger() {
  lingering_ = false;
  closing_ = false;
  timer_.cancel();
  fail();  // closes the socket
}

void WsSession::fail() {
  if (failed_) {
    if (!closing_) beast::get_lowest_layer(ws_).close();
    return;
  }
  failed_ = true;
  timer_.cancel();  // a paced read's wait
  on_gone();
  if (!closing_) beast::get_lowest_layer(ws_).close();
}

}  // namespace nexus::server
