// WsSession: the WebSocket transport every WebSocket protocol of the server
// shares (internal to HttpServer; HttpSession hands over the socket of an
// upgrade request): GET /v1/realtime (realtime_session.h) and the Responses
// API's WebSocket mode on GET /v1/responses (responses/responses_ws_session.h).
// A protocol subclasses it and implements the hooks below; it never touches
// the socket.
//
// Threading: everything runs on the connection's strand. Engine events reach
// it through a WsRelay: the engine thread only copies the event and posts
// it, so a slow reader never blocks the engine.
//
// Output is a queue of messages with one async_write in flight. When more
// than max_pending_bytes wait, on_backlog() tells the protocol (which
// cancels its running response); a client that still does not read (queue
// over twice the limit) is disconnected.
//
// Input: a text message at most body_limit bytes reaches on_text(); one over
// the limit is refused as soon as it passes it (error message_too_large, the
// rest discarded as it comes; the session goes on), a binary message is
// refused (binary_not_supported). Refused input is paced, then cut off
// (refused_input.h has the model): every message answered with an error is
// counted; a client that keeps sending them is read at body_limit bytes a
// second, and past 4 x body_limit of them (forgotten at body_limit a
// minute) the session gets an error input_flood, its running response is
// cancelled, and once its output is written it is closed with 1008 (policy
// violation) by linger_close(): the close frame is written without waiting
// for the peer's, and what the peer still sends is discarded below the
// WebSocket layer.
//
// Liveness: a read is always pending (unless the protocol holds reading
// while it parses a message elsewhere); after ws_ping_interval of silence
// the server pings, and a peer silent for another interval is disconnected.
// A connection that goes away (error, close, timeout) calls on_gone() once.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "server/http_session.h"
#include "server/refused_input.h"
#include "server/ws_frame_guard.h"

namespace nexus::server {

// A fresh engine session id (GenerationRequest::session), unique per process.
uint64_t next_engine_session();

class WsSession : public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  virtual ~WsSession();
  // Registers with the context and answers the upgrade request.
  void start(boost::beast::http::request<boost::beast::http::string_body> req);
  // Thread-safe: the protocol's on_shutdown(), an error server_shutting_down,
  // and a close with 1001 (going away).
  void shutdown();
  virtual void on_engine_event(const GenerationEvent& ev) = 0;  // on the strand
  boost::asio::any_io_executor executor() { return ws_.get_executor(); }

 protected:
  // --- The protocol's hooks (all on the strand) ---
  // The subprotocol to select from the upgrade request ("" for none).
  virtual std::string subprotocol(const boost::beast::http::request<boost::beast::http::string_body>& req) const {
    return {};
  }
  virtual void on_open() {}
  // A whole text message within body_limit. The protocol may hold_reading()
  // (to parse it elsewhere) and resume_reading() later.
  virtual void on_text(std::string_view text) = 0;
  // An error message of the protocol's shape for a transport-level refusal
  // (message_too_large, binary_not_supported, input_flood, server_shutting_down).
  virtual std::string error_message(const std::string& code, const std::string& message) const = 0;
  // A response is running or being prepared: a close waits for its end.
  virtual bool busy() const = 0;
  // The output queue passed max_pending_bytes (the reader is slow).
  virtual void on_backlog() = 0;
  // The server stops: stop waiting for engine events (detach, cancel).
  virtual void on_shutdown() = 0;
  // A cut-off or session close: cancel what runs; true when a response was
  // running (its end then closes the connection).
  virtual bool on_closing() = 0;
  // The connection is gone (once): release the engine's side.
  virtual void on_gone() = 0;

  // --- For the protocol ---
  void send(std::string msg);
  // Sends `error` in answer to the message read last and counts it as
  // refused; cut_off() once the budget is spent.
  void refuse(std::string error);
  // Close once the output is written and no response runs (a protocol's
  // "close" message; after shutdown).
  void close_when_done();
  void hold_reading() { hold_ = true; }
  void resume_reading();
  // Whether the session will take no more work (closing, gone).
  bool closing_down() const { return close_after_output_ || failed_ || closing_; }
  bool gone() const { return failed_; }
  // Called by the protocol when a response ends: closes now if a close waits.
  void after_response();

  ServerContext& ctx_;
  Backend& backend_;

 private:
  void on_accept(boost::beast::error_code ec);
  void do_read();
  void on_read(boost::beast::error_code ec, size_t n);
  void cut_off();
  void linger_close();
  void linger_read();
  void on_linger_read(boost::beast::error_code ec, size_t n);
  void end_linger();
  void do_write();
  void on_write(boost::beast::error_code ec);
  void begin_close();
  void fail();

  struct Registration {
    ServerContext& ctx;
    WsSession* self;
    ~Registration();
  };
  Registration registration_;
  // FrameLengthGuard: a 64-bit frame length with its top bit set closes
  // with 1002 at once (ws_frame_guard.h).
  boost::beast::websocket::stream<FrameLengthGuard<boost::beast::tcp_stream>> ws_;
  boost::beast::flat_buffer rbuf_;
  bool oversized_ = false;  // the message being read is over body_limit: discarded
  bool hold_ = false;       // the protocol holds reading
  RefusedInput refused_input_;
  bool cut_off_ = false;    // input_flood sent: nothing more is read
  bool lingering_ = false;
  uint64_t drained_ = 0;
  std::unique_ptr<char[]> drain_buf_;
  boost::asio::steady_timer timer_;  // a paced read's wait, then the linger

  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  bool writing_ = false;
  bool accepted_ = false;
  bool close_after_output_ = false;
  bool closing_ = false;
  boost::beast::websocket::close_code close_code_ = boost::beast::websocket::close_code::normal;
  bool failed_ = false;
};

// Carries engine events to a WsSession's strand (as EventRelay does for
// HttpSession); detach() makes later events vanish.
class WsRelay {
 public:
  WsRelay(std::shared_ptr<PostGate> gate, std::shared_ptr<WsSession> s) : gate_(std::move(gate)), session_(std::move(s)) {}
  void deliver(const GenerationEvent& ev);  // engine thread
  void detach();

 private:
  std::shared_ptr<PostGate> gate_;
  std::shared_ptr<WsSession> session_;  // guarded by gate_->mu
};

}  // namespace nexus::server
