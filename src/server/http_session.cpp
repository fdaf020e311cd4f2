#include "server/http_session.h"

#include "server/api_key.h"
#include "server/core/protocol.h"
#include "server/realtime_session.h"
#include "server/responses/responses_ws_session.h"
#include "server/routes.h"
#include "server/request_dispatch.h"
#include "server/request_framing.h"
#include "server/sse.h"
#include "server/stats_stream.h"

#include <boost/asio/post.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <fmt/format.h>

namespace nexus::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kWatchdogRead = 4096;
constexpr size_t kFirstRead = 4096;  // bytes read while waiting for a request's first byte

// A 204 has neither Content-Type nor Content-Length (RFC 9110 section 8.6).
std::string reply_head(int status, size_t content_length, bool keep_alive, const HeaderList& extra,
                       const HeaderList& cors, std::string_view content_type) {
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  std::string h = fmt::format("HTTP/1.1 {} {}\r\nServer: nexus\r\n", status,
                              std::string_view(reason.data(), reason.size()));
  if (status != 204) h += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", content_type, content_length);
  h += fmt::format("Connection: {}\r\n", keep_alive ? "keep-alive" : "close");
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  for (const auto& [k, v] : cors) h += k + ": " + v + "\r\n";
  return h + "\r\n";
}

}  // namespace

void EventRelay::deliver(const GenerationEvent& ev) {
  std::lock_guard lock(gate_->mu);
  if (!gate_->open || !session_) return;
  // Only the posted handler may hold the session past this point: were the
  // engine thread to drop the last reference, the session (its socket and
  // timers) would be destroyed here, racing with the server's shutdown.
  std::shared_ptr<HttpSession> s = ev.done ? std::move(session_) : session_;
  auto ex = s->executor();  // destroyed under the lock too (it refers into the io_context)
  net::post(ex, [s = std::move(s), ev, i = index_] { s->on_engine_event(ev, i); });
}

void EventRelay::detach() {
  std::lock_guard lock(gate_->mu);
  session_.reset();
}

HttpSession::HttpSession(tcp::socket socket, ServerContext& ctx)
    : registration_{ctx, this},
      stream_(std::move(socket)),
      ctx_(ctx),
      timer_(stream_.get_executor()),
      deadline_(stream_.get_executor()) {}

HttpSession::Registration::~Registration() {
  if (refusing) ctx.refusing.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard lock(ctx.mu);
  ctx.sessions.erase(self);
  ctx.cv.notify_all();
}

void HttpSession::start() {
  {
    std::lock_guard lock(ctx_.mu);
    ctx_.sessions.emplace(this, weak_from_this());
  }
  net::post(executor(), [self = shared_from_this()] { self->do_read(); });
}

void HttpSession::refuse(HttpReply reply) {
  registration_.refusing = true;
  ctx_.refusing.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(ctx_.mu);
    ctx_.sessions.emplace(this, weak_from_this());
  }
  net::post(executor(), [self = shared_from_this(), reply = std::move(reply)] {
    self->method_ = "-";
    self->target_ = "-";
    self->start_ = std::chrono::steady_clock::now();
    self->keep_alive_ = false;
    self->send_reply(reply);  // then linger_close: the client reads the 503, not a reset
  });
}

namespace {

// 503 server_shutting_down, for requests refused while the server drains
// and for generations it stops (in a stream: the protocol's error event).
ApiError shutting_down_error(const std::string& message) {
  return ApiError(503, message, "", "server_shutting_down", "server_error");
}

HttpReply with_retry_after(HttpReply r) {
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

constexpr const char* kStoppedMidGeneration =
    "The server stopped before this generation finished; send the request to another replica.";

}  // namespace

void HttpSession::shutdown() {
  net::post(executor(), [self = shared_from_this()] { self->end_for_shutdown(); });
}

// The server stops with this generation unfinished (its drain ran out, or a
// second stop signal came): tell the client why instead of cutting the
// connection. A stream ends with an SSE error event and [DONE], a waiting
// non-streaming request gets a 503; both with code server_shutting_down, as
// the requests refused during the drain, and then the connection closes.
void HttpSession::end_for_shutdown() {
  if (!generating_ || closed_ || !formatter_) return close();
  cancel_generation();
  keep_alive_ = false;
  if (!formatter_->stream())
    return send_reply(with_retry_after(formatter_->error_reply(shutting_down_error(kStoppedMidGeneration))));
  log_request(200, " (server shutting down)");
  enqueue_body(formatter_->stream_error(shutting_down_error(kStoppedMidGeneration)));
  if (chunked_) enqueue("0\r\n\r\n");
  response_queued_ = true;
  if (!writing_) after_response_written();
}

// Reads run without the stream's own timeout (which closes the socket): a
// deadline cancels them instead, so a 408 can still be written.
void HttpSession::arm_deadline(std::chrono::milliseconds after) {
  const uint64_t gen = ++deadline_gen_;
  timed_out_ = false;
  deadline_.expires_after(after);
  deadline_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
    if (ec || gen != self->deadline_gen_ || self->closed_) return;
    self->timed_out_ = true;
    beast::error_code ignored;
    self->stream_.socket().cancel(ignored);
  });
}

void HttpSession::do_read() {
  if (closed_) return;
  parser_.emplace();
  parser_->body_limit(ctx_.opts.body_limit);
  parser_->header_limit(kMaxHeaderBytes);
  head_ = false;
  cors_headers_.clear();
  stream_.expires_never();
  if (buffer_.size() > 0) return read_header();  // pipelined: the next request is here
  // Idle (keep-alive, or a new connection): wait for the first byte.
  phase_ = ReadPhase::Idle;
  arm_deadline(ctx_.opts.idle_timeout);
  stream_.async_read_some(buffer_.prepare(kFirstRead), [self = shared_from_this()](beast::error_code ec, size_t n) {
    if (ec) return self->on_read_error(ec);
    self->buffer_.commit(n);
    self->read_header();
  });
}

void HttpSession::read_header() {
  if (closed_) return;
  phase_ = ReadPhase::Header;
  arm_deadline(ctx_.opts.header_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpSession::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  ++deadline_gen_;  // the header deadline is over (the body's is armed below)
  deadline_.cancel();
  const auto& req = parser_->get();
  const auto origin = req[http::field::origin];
  cors_headers_ = ctx_.cors.response_headers(std::string_view(origin.data(), origin.size()));
  head_ = req.method() == http::verb::head;
  // Framing is checked before any body byte is read: a request whose body
  // length is ambiguous gets its error and the connection closes, so no
  // byte of it is ever read as another request.
  std::optional<ApiError> bad = request_framing_error(req.base(), req.version());
  if (!bad) bad = request_target_error(std::string_view(req.target().data(), req.target().size()));
  if (bad) {
    method_ = std::string(req.method_string());
    target_ = std::string(req.target().substr(0, 256));
    start_ = std::chrono::steady_clock::now();
    keep_alive_ = false;
    return send_reply(error_reply(protocol_of(target_), *bad));
  }
  // Absolute-form (a client talking to us as to a proxy): routed by its path.
  if (std::optional<std::string> path = origin_form(std::string_view(req.target().data(), req.target().size())))
    parser_->get().target(*path);
  if (beast::iequals(req[http::field::expect], "100-continue")) enqueue("HTTP/1.1 100 Continue\r\n\r\n");
  if (parser_->is_done()) return on_body({});
  phase_ = ReadPhase::Body;
  arm_deadline(ctx_.opts.body_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void HttpSession::on_body(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  ++deadline_gen_;  // the deadline no longer applies
  deadline_.cancel();
  handle_request();
}

void HttpSession::on_read_error(beast::error_code ec) {
  if (closed_) return;
  ++deadline_gen_;
  deadline_.cancel();
  if (timed_out_) {
    timed_out_ = false;
    // Idle: nothing was asked, nothing is answered (RFC 9112 section 9.6).
    if (phase_ == ReadPhase::Idle) return close();
    const bool header = phase_ == ReadPhase::Header;
    method_ = header ? "-" : std::string(parser_->get().method_string());
    target_ = header ? "-" : std::string(parser_->get().target().substr(0, 256));
    start_ = std::chrono::steady_clock::now();
    keep_alive_ = false;
    const auto limit = header ? ctx_.opts.header_timeout : ctx_.opts.body_timeout;
    return send_reply(error_reply(protocol_of(target_), ApiError(
        408,
        fmt::format("The request {} did not arrive within {} ms{}.", header ? "header" : "body", limit.count(),
                    header ? " of its first byte" : " of its header"),
        "", "request_timeout")));
  }
  const bool got_header = parser_ && parser_->is_header_done();
  if (got_header) {
    method_ = std::string(parser_->get().method_string());
    target_ = std::string(parser_->get().target());
  } else {
    method_ = "-";
    target_ = "-";
  }
  start_ = std::chrono::steady_clock::now();
  keep_alive_ = false;
  if (ec == http::error::body_limit) {
    // Beast refuses a too-large Content-Length while still reading the
    // header: the request line is parsed, and names the protocol.
    if (!got_header) target_ = std::string(parser_->get().target().substr(0, 256));
    return send_reply(error_reply(protocol_of(target_), ApiError(
        413, fmt::format("The request body exceeds the limit of {} bytes.", ctx_.opts.body_limit), "",
        "request_too_large")));
  }
  if (ec == http::error::header_limit) {
    const auto data = buffer_.data();
    const auto target = parser_->get().target();  // set once Beast parsed the request line
    return send_reply(error_reply(protocol_of(target_), header_too_large_error(std::string_view(target.data(), target.size()),
                                                         std::string_view(static_cast<const char*>(data.data()), data.size()))));
  }
  // A half-read request that is not an end of stream / timeout is malformed.
  const bool benign = ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
                      ec == net::error::operation_aborted || ec == net::error::connection_reset;
  if (benign || (!got_header && buffer_.size() == 0)) return close();
  send_reply(error_reply(protocol_of(target_), ApiError(400, "Malformed HTTP request: " + ec.message(), "", "bad_http_request")));
}

void HttpSession::handle_request() {
  const auto& req = parser_->get();
  method_ = std::string(req.method_string());
  target_ = std::string(req.target());
  start_ = std::chrono::steady_clock::now();
  keep_alive_ = req.keep_alive();
  chunked_ = req.version() >= 11;
  // /metrics and /load still answer while draining (a router reads "draining" there).
  const Route* route = find_route(target_);
  const bool status_target = route && (route->id == RouteId::Metrics || route->id == RouteId::Load);
  if (ctx_.draining.load(std::memory_order_relaxed) && !status_target) {
    keep_alive_ = false;
    return send_reply(with_retry_after(error_reply(
        protocol_of(target_), shutting_down_error("The server is shutting down; send the request to another replica."))));
  }
  if (!ctx_.opts.api_key.empty() && !open_without_key(method_, target_)) {
    const auto auth = req[http::field::authorization];
    const auto protocols = req[http::field::sec_websocket_protocol];
    const auto x_api_key = req["x-api-key"];  // Anthropic's clients (Claude Code, @anthropic-ai/sdk)
    const auto key = presented_key(std::string_view(auth.data(), auth.size()),
                                   std::string_view(protocols.data(), protocols.size()),
                                   std::string_view(x_api_key.data(), x_api_key.size()));
    if (!key || !same_key(*key, ctx_.opts.api_key)) {
      const Protocol protocol = protocol_of(target_);
      HttpReply r = error_reply(protocol, invalid_api_key(key.has_value(), protocol));
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return send_reply(r);
    }
  }
  if (req.body().size() < TokenizerPool::kOffThreadBytes)
    return on_dispatched(dispatch_request(req, ctx_.router, ctx_.cors));
  // A large body: parse, render and tokenize it on the pool; the session
  // reads nothing meanwhile (parser_ is the pool's until the result is back).
  dispatching_ = true;
  const bool queued = ctx_.tokenizer.post([self = shared_from_this()]() mutable {
    auto d = std::make_shared<Dispatch>(dispatch_request(self->parser_->get(), self->ctx_.router, self->ctx_.cors));
    HttpSession& s = *self;
    gated_post(*s.ctx_.gate, s.executor(), [self = std::move(self), d] {
      self->dispatching_ = false;
      self->on_dispatched(std::move(*d));
    });
  });
  if (!queued) close();  // the server is stopping
}

void HttpSession::on_dispatched(Dispatch d) {
  if (closed_) return;
  head_ = d.head;
  cors_headers_ = std::move(d.cors);
  if (std::holds_alternative<UpgradeToRealtime>(d.action)) return upgrade<RealtimeSession>();
  if (std::holds_alternative<UpgradeToResponses>(d.action)) return upgrade<ResponsesWsSession>();
  if (std::holds_alternative<StreamStats>(d.action)) return hand_to_stats_stream();
  if (auto* reply = std::get_if<HttpReply>(&d.action)) return send_reply(*reply);
  start_generation(std::move(std::get<PendingGeneration>(d.action)));
}

template <class Session>
void HttpSession::upgrade() {
  // The socket moves to a WebSocket session (same strand); this session ends.
  // Bytes already read past the request stay behind: a client must not send
  // frames before the 101 response (RFC 6455, section 4.1).
  log_request(101);
  closed_ = true;
  auto ws = std::make_shared<Session>(stream_.release_socket(), ctx_);
  ws->start(parser_->release());
}

void HttpSession::hand_to_stats_stream() {
  // As for an upgrade: the socket moves to a StatsStreamSession, this session ends.
  log_request(200, " (stats stream)");
  closed_ = true;
  auto s = std::make_shared<StatsStreamSession>(stream_.release_socket(), ctx_.stats, ctx_.opts.max_pending_bytes,
                                                std::move(cors_headers_), chunked_);
  s->start();
}

bool HttpSession::submit_choice(GenerationRequest req) {
  const auto index = static_cast<int32_t>(handles_.size());
  auto relay = std::make_shared<EventRelay>(ctx_.gate, shared_from_this(), index);
  auto handle = ctx_.router.backend().submit(std::move(req), [relay](const GenerationEvent& ev) { relay->deliver(ev); });
  if (!handle) {
    relay->detach();
    return false;
  }
  relays_.push_back(std::move(relay));
  handles_.push_back(std::move(handle));
  return true;
}

void HttpSession::cancel_generation() {
  for (const auto& h : handles_) h->cancel();
  for (const auto& r : relays_) r->detach();
  handles_.clear();
  relays_.clear();
  more_.clear();
  generating_ = false;
}

// Choices 1..n-1, once choice 0's prompt is in the prefix cache (choices.h).
// A full queue ends the whole response with the 429 (streaming: as an SSE
// error event and [DONE]).
void HttpSession::submit_more_choices() {
  std::vector<GenerationRequest> more = std::move(more_);
  more_.clear();
  for (GenerationRequest& r : more) {
    if (submit_choice(std::move(r))) continue;
    cancel_generation();
    if (!formatter_->stream()) return send_reply(with_retry_after(formatter_->error_reply(ApiRouter::queue_full_error())));
    log_request(200, " (queue full)");
    enqueue_body(formatter_->stream_error(ApiRouter::queue_full_error()));
    if (chunked_) enqueue("0\r\n\r\n");
    response_queued_ = true;
    if (!writing_) after_response_written();
    return;
  }
}

void HttpSession::start_generation(PendingGeneration g) {
  more_ = std::move(g.more);
  if (!submit_choice(std::move(g.request))) {
    more_.clear();
    return send_reply(with_retry_after(g.formatter->error_reply(ApiRouter::queue_full_error())));
  }
  generating_ = true;
  overflow_ = false;
  in_flight_ = true;
  ctx_.http_in_flight.fetch_add(1, std::memory_order_relaxed);
  formatter_ = std::move(g.formatter);
  if (formatter_->stream()) {
    if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the stream is the close
    std::string head = fmt::format("HTTP/1.1 200 OK\r\nServer: nexus\r\nContent-Type: text/event-stream\r\n"
                                   "Cache-Control: no-cache\r\nConnection: {}\r\n{}",
                                   keep_alive_ ? "keep-alive" : "close",
                                   chunked_ ? "Transfer-Encoding: chunked\r\n" : "");
    for (const auto& [k, v] : cors_headers_) head += k + ": " + v + "\r\n";
    enqueue(head + "\r\n");
    enqueue_body(formatter_->stream_preamble());
  }
  // Watch for the client leaving, unless it already sent more (pipelining):
  // those bytes belong to the next request, and a read pending on top of
  // them could wait forever once this response is done.
  if (!watchdog_pending_ && buffer_.size() == 0) arm_watchdog();
}

void HttpSession::on_engine_event(const GenerationEvent& ev, int32_t index) {
  if (!generating_ || closed_) return;
  if (ev.done && ev.finish == FinishReason::Cancelled) {
    // Cancelled by us: the client is gone or too slow. Nothing more to say.
    cancel_generation();
    log_request(formatter_->stream() ? 200 : 499, overflow_ ? " (client too slow)" : " (cancelled)");
    return close();
  }
  if (index == 0 && !more_.empty()) {
    if (ev.done && ev.finish == FinishReason::Error) more_.clear();
    else submit_more_choices();
    if (!generating_) return;  // the queue was full
  }
  std::string out = formatter_->on_event(ev, index);
  const bool finished = formatter_->finished();
  if (finished) cancel_generation();  // a no-op unless a choice failed while others run
  if (formatter_->stream()) {
    if (finished) log_request(200);  // before the last bytes leave: the log is never behind the client
    enqueue_body(out);
    if (finished) {
      if (chunked_) enqueue("0\r\n\r\n");
      response_queued_ = true;
      if (!writing_) after_response_written();
    }
  } else if (finished) {
    send_reply(HttpReply{formatter_->status(), std::move(out), {}});
  }
}

void HttpSession::send_reply(const HttpReply& r) {
  log_request(r.status);
  // HEAD: the header GET would have, Content-Length included, and no body.
  std::string out = reply_head(r.status, r.body.size(), keep_alive_, r.headers, cors_headers_, r.content_type);
  if (!head_) out += r.body;
  enqueue(out);
  response_queued_ = true;
}

void HttpSession::enqueue(std::string_view bytes) {
  if (closed_ || bytes.empty()) return;
  pending_ += bytes;
  if (generating_ && !overflow_ && pending_.size() > ctx_.opts.max_pending_bytes) {
    overflow_ = true;  // the Cancelled event closes the connection
    for (const auto& h : handles_) h->cancel();
  }
  if (!writing_) do_write();
}

void HttpSession::enqueue_body(std::string_view data) {
  if (data.empty()) return;
  if (!chunked_) return enqueue(data);
  std::string chunk = fmt::format("{:x}\r\n", data.size());
  chunk += data;
  chunk += "\r\n";
  enqueue(chunk);
}

void HttpSession::do_write() {
  writing_ = true;
  inflight_.swap(pending_);
  pending_.clear();
  stream_.expires_after(ctx_.opts.write_timeout);
  net::async_write(stream_, net::buffer(inflight_),
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void HttpSession::on_write(beast::error_code ec) {
  writing_ = false;
  inflight_.clear();
  if (closed_) return;
  if (ec) {
    if (generating_) log_request(formatter_->stream() ? 200 : 499, " (client gone)");
    return close();
  }
  if (!pending_.empty()) return do_write();
  if (response_queued_) after_response_written();
}

void HttpSession::end_in_flight() {
  if (!in_flight_) return;
  in_flight_ = false;
  ctx_.http_in_flight.fetch_sub(1, std::memory_order_relaxed);
}

void HttpSession::after_response_written() {
  if (closed_) return;
  end_in_flight();
  response_queued_ = false;
  formatter_.reset();
  if (!keep_alive_) return linger_close();
  if (!watchdog_pending_) return do_read();
  // The watchdog read is still pending: it now waits for the next request.
  waiting_for_next_ = true;
  timer_.expires_after(ctx_.opts.idle_timeout);
  timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && self->waiting_for_next_) self->close();
  });
}

void HttpSession::arm_watchdog() {
  watchdog_pending_ = true;
  // Straight on the socket, not via the stream: no timeout while generating.
  stream_.socket().async_read_some(
      buffer_.prepare(kWatchdogRead),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watchdog(ec, n); });
}

void HttpSession::on_watchdog(beast::error_code ec, size_t n) {
  watchdog_pending_ = false;
  if (closed_) return;
  if (ec) {
    if (generating_) {
      log_request(formatter_->stream() ? 200 : 499, " (client gone)");
      cancel_generation();
    }
    return close();
  }
  buffer_.commit(n);
  if (lingering_) {
    drained_ += buffer_.size();
    buffer_.consume(buffer_.size());
    return drained_ < kLingerMaxDrain ? arm_watchdog() : close();
  }
  if (waiting_for_next_) {
    waiting_for_next_ = false;
    timer_.cancel();
    return do_read();
  }
  // Otherwise the next request started while this one runs: stop watching
  // (see start_generation); after_response_written reads it.
}

void HttpSession::linger_close() {
  // Half-close, then drain what the client still sends (e.g. the rest of an
  // oversized body; see kLingerTime).
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  lingering_ = true;
  buffer_.consume(buffer_.size());
  timer_.expires_after(kLingerTime);
  timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->close();
  });
  if (!watchdog_pending_) arm_watchdog();
}

void HttpSession::close() {
  if (closed_) return;
  closed_ = true;
  end_in_flight();
  cancel_generation();
  timer_.cancel();
  ++deadline_gen_;
  deadline_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

void HttpSession::log_request(int status, const char* note) {
  // Called once per answered request, before its last bytes are queued, so
  // neither the count nor the log is behind what a client has seen.
  ctx_.requests_served.fetch_add(1, std::memory_order_relaxed);
  // GET /load is a router's poll (20 a second per gateway): not logged.
  if (!ctx_.opts.log || (status == 200 && target_ == "/load")) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  ctx_.opts.log(fmt::format("{} {} {} {:.1f}ms{}", method_, target_, status, ms, note));
}

}  // namespace nexus::server
