// HttpSession: one client connection (internal to HttpServer).
//
// Everything a session does runs on its strand. Per request it waits for the
// first byte (idle_timeout: then closed without a response), reads the header
// (header_timeout, kMaxHeaderBytes; framing and target length checked there,
// request_framing.h; answering "Expect: 100-continue"), then the body
// (body_timeout, body_limit; either timeout is a 408), asks dispatch_request
// (request_dispatch.h: HEAD, CORS, the WebSocket handshake, the ApiRouter) --
// on the TokenizerPool when the body has TokenizerPool::kOffThreadBytes or
// more, so parsing, rendering and tokenizing it never holds an I/O thread --
// and queues a reply (without its body for HEAD), submits a generation, or
// hands the socket to a RealtimeSession (GET /v1/realtime) or a
// StatsStreamSession (GET /v1/stats/stream).
//
// Output goes through one byte queue with at most one async_write in flight;
// whatever accumulates meanwhile leaves in the next write. Engine events reach
// the session through an EventRelay: the engine thread only copies the event
// and posts it to the strand, so a slow client never blocks the engine; if
// the queue passes max_pending_bytes the generation is cancelled.
//
// While a generation runs, a read stays pending on the socket: EOF or an
// error there (the client went away) cancels the generation at its next token.
// Bytes that arrive instead (a pipelined request) are kept for the next
// request. Streams use chunked transfer encoding so the connection stays
// reusable after `data: [DONE]`.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/api_router.h"
#include "server/cors.h"
#include "server/http_server.h"
#include "server/request_dispatch.h"
#include "server/tokenizer_pool.h"

namespace nexus::server {

class HttpSession;
class WsSession;

// A connection closed for something the client sent (an oversized body, a
// realtime flood) is half-closed and drained first: closing with unread data
// would reset it and could destroy the answer before the client reads it.
// The drain ends after kLingerTime or kLingerMaxDrain bytes.
inline constexpr std::chrono::seconds kLingerTime{5};
inline constexpr size_t kLingerMaxDrain = 64u << 20;
class StatsHub;

// Whether engine threads may still post into the server's io_context.
// HttpServer::stop() closes it before the io_context goes away; a post holds
// `mu` from before it touches the io_context (executor copies included) until
// after, so once close() returns no engine thread is inside one.
struct PostGate {
  std::mutex mu;
  bool open = true;
  void close() {
    std::lock_guard lock(mu);
    open = false;
  }
};

// Posts `fn` to `ex` unless the gate is closed (then `fn` is dropped, after
// the lock is released). Any thread.
template <class Executor, class Fn>
bool gated_post(PostGate& gate, const Executor& ex, Fn fn) {
  std::lock_guard lock(gate.mu);
  if (!gate.open) return false;
  boost::asio::post(ex, std::move(fn));
  return true;
}

// State shared by the server and its sessions.
struct ServerContext {
  ServerContext(Backend& backend, HttpServerOptions o);
  static std::shared_ptr<StatsHub> make_stats_hub(Backend& backend);  // http_server.cpp
  // nexus_http_connections_accepted_total, nexus_http_accept_errors_total,
  // nexus_http_connections_open, nexus_http_connections_refused_total,
  // nexus_realtime_sessions_cut_off_total.
  std::string server_metrics_text() const;
  // HTTP and realtime sessions alive now, refused ones not counted (a
  // connection being upgraded may count twice for a moment).
  size_t open_connections() const;
  ApiRouter router;
  HttpServerOptions opts;  // max_connections resolved (> 0)
  CorsPolicy cors;
  TokenizerPool tokenizer;
  std::shared_ptr<StatsHub> stats;  // GET /v1/stats/stream (stats_stream.h)
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> accept_errors{0};  // accept() failures (EMFILE, ...), each followed by a wait
  std::atomic<uint64_t> connections_refused{0};  // over max_connections
  std::atomic<uint64_t> realtime_cut_off{0};     // sessions closed for refused input (input_flood)
  std::atomic<int32_t> refusing{0};              // refused sessions still sending their 503
  std::atomic<uint64_t> requests_served{0};
  // HttpServer::drain(): new requests get 503, running ones go on.
  std::atomic<bool> draining{false};
  // HTTP generations submitted whose response is not yet fully written.
  std::atomic<int32_t> http_in_flight{0};
  // Live sessions, for stop(); guarded by mu. cv signals a session's end.
  mutable std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions;
  std::unordered_map<WsSession*, std::weak_ptr<WsSession>> ws_sessions;  // realtime and Responses WebSocket
  std::shared_ptr<PostGate> gate = std::make_shared<PostGate>();
};

// Carries the events of one choice's generation (`index`) from the engine
// thread to a session's strand; detach() makes later events vanish (session
// closed). Shares the server's gate.
class EventRelay {
 public:
  EventRelay(std::shared_ptr<PostGate> gate, std::shared_ptr<HttpSession> s, int32_t index)
      : gate_(std::move(gate)), session_(std::move(s)), index_(index) {}
  void deliver(const GenerationEvent& ev);  // engine thread
  void detach();

 private:
  std::shared_ptr<PostGate> gate_;
  std::shared_ptr<HttpSession> session_;  // guarded by gate_->mu
  int32_t index_;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  void start();     // registers with the context and starts reading
  // Instead of start(): answers `reply` (a 503 for max_connections) at once,
  // without reading a request, and closes. Counted in ctx.refusing.
  void refuse(HttpReply reply);
  // Thread-safe: cancel the generation, end its response with an error (an
  // SSE error event and [DONE], or a 503), close the socket.
  void shutdown();
  void on_engine_event(const GenerationEvent& ev, int32_t index);  // on the strand
  boost::asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  void do_read();
  void read_header();
  void arm_deadline(std::chrono::milliseconds after);
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  void on_read_error(boost::beast::error_code ec);
  void handle_request();
  void on_dispatched(Dispatch d);
  template <class Session>
  void upgrade();  // hands the socket to a WsSession of type Session
  void hand_to_stats_stream();  // GET /v1/stats/stream (stats_stream.h)
  void start_generation(PendingGeneration g);
  bool submit_choice(GenerationRequest req);  // the next choice; false: queue full
  void submit_more_choices();
  void cancel_generation();                   // every choice's, and detach their relays
  void send_reply(const HttpReply& r);
  void enqueue(std::string_view bytes);
  void enqueue_body(std::string_view data);  // chunk-framed when chunked_
  void do_write();
  void on_write(boost::beast::error_code ec);
  void after_response_written();
  void arm_watchdog();
  void on_watchdog(boost::beast::error_code ec, size_t n);
  void linger_close();
  void close();
  void end_for_shutdown();
  void log_request(int status, const char* note = "");

  // Unregisters the session from ServerContext::sessions. Declared first so
  // it is destroyed last: an empty registry means every socket and timer of
  // every session is gone (HttpServer::stop() relies on it).
  struct Registration {
    ServerContext& ctx;
    HttpSession* self;
    bool refusing = false;  // counted in ctx.refusing
    ~Registration();
  };
  Registration registration_;
  boost::beast::tcp_stream stream_;
  ServerContext& ctx_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  boost::asio::steady_timer timer_;  // idle wait after a response, or linger
  // Read deadlines (idle, header, body): on expiry the read is cancelled and
  // timed_out_ set; the socket stays open for the 408.
  enum class ReadPhase { Idle, Header, Body };
  boost::asio::steady_timer deadline_;
  ReadPhase phase_ = ReadPhase::Idle;
  uint64_t deadline_gen_ = 0;
  bool timed_out_ = false;
  bool dispatching_ = false;  // dispatch_request runs on the TokenizerPool

  // The current request.
  std::string method_, target_;
  std::chrono::steady_clock::time_point start_;
  bool keep_alive_ = true;
  bool chunked_ = false;
  bool head_ = false;        // HEAD: replies go without their body
  HeaderList cors_headers_;  // on every response to this request

  // Output queue.
  std::string pending_, inflight_;
  bool writing_ = false;
  bool response_queued_ = false;  // the whole response is in the queue

  // The running generation: one relay and handle per submitted choice,
  // the choices not submitted yet (choices.h).
  std::vector<std::shared_ptr<EventRelay>> relays_;
  std::vector<std::shared_ptr<RequestHandle>> handles_;
  std::vector<GenerationRequest> more_;
  std::unique_ptr<ResponseFormatter> formatter_;
  bool generating_ = false;
  bool overflow_ = false;
  bool in_flight_ = false;  // counted in ctx_.http_in_flight
  void end_in_flight();

  bool watchdog_pending_ = false;
  bool waiting_for_next_ = false;  // response done; the pending read awaits the next request
  bool lingering_ = false;
  size_t drained_ = 0;
  bool closed_ = false;
};

}  // namespace nexus::server
