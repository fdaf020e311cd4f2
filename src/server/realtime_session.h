// RealtimeSession: one WebSocket connection of GET /v1/realtime (internal to
// HttpServer; HttpSession hands over the socket of an upgrade request).
// Protocol: realtime_protocol.h, docs/protocol.md.
//
// One session = one engine session id: the conversation is kept as token ids
// (realtime_conversation.h) and the engine keeps its KV between responses, so
// each turn prefills only its new input. At most one response runs at a time.
//
// Threading: everything runs on the connection's strand. Engine events reach
// it through a RealtimeRelay: the engine thread only copies the event and
// posts it, so a slow reader never blocks the engine. Output is a queue of
// messages with one async_write in flight; when more than max_pending_bytes
// wait, the running response is cancelled, its remaining deltas are dropped,
// and response.done is followed by an `error` slow_consumer. A client that
// still does not read (queue over twice the limit) is disconnected.
//
// Input bounds: an input.append (or response.redirect input) that would
// bring the pending input past the context's room in bytes -- (n_ctx - kept
// tokens - 1) * Backend::max_token_bytes(), input that cannot fit whatever
// it tokenizes to -- is refused with an `error` event input_too_large and
// never tokenized (one of TokenizerPool::kOffThreadBytes or more is measured
// by realtime_input_probe.h and, when it cannot fit, not even parsed); the
// input queued before it stays. A response.create whose
// pending input has TokenizerPool::kOffThreadBytes or more builds its prompt
// on the TokenizerPool (the session is "preparing": another response.create
// or a redirect gets response_in_progress, a cancel no_response), so an I/O
// thread never tokenizes a large input.
//
// Refused input is paced, then cut off (refused_input.h has the model):
// every client message answered with an `error` (an input too large for
// the context, a message over body_limit -- refused as soon as it passes
// the limit --, an invalid or refused event) is counted; a client that keeps
// sending them is read at body_limit bytes a second, and past 4 x
// body_limit of them (forgotten at body_limit a minute) the session gets an
// `error` input_flood, its running response is cancelled, and once its
// output is written it is closed with 1008 (policy violation) by
// linger_close(): the close frame is written without waiting for the
// peer's, and what the peer still sends is discarded below the WebSocket
// layer. A flooding client thus costs a bounded amount of reading, at a
// bounded rate.
//
// Liveness: a read is always pending; after ws_ping_interval of silence the
// server pings, and a peer silent for another interval is disconnected.
// A connection that goes away (error, close, timeout) cancels its running
// response; the engine session is ended (its KV released) once no response
// runs any more.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/http_session.h"
#include "server/realtime_conversation.h"
#include "server/refused_input.h"
#include "server/ws_frame_guard.h"

namespace nexus::server {

class RealtimeRelay;

class RealtimeSession : public std::enable_shared_from_this<RealtimeSession> {
 public:
  RealtimeSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  ~RealtimeSession();
  // Registers with the context and answers the upgrade request.
  void start(boost::beast::http::request<boost::beast::http::string_body> req);
  // Thread-safe: cancel the running response, send an error event
  // (server_shutting_down) and close with 1001 (going away).
  void shutdown();
  void on_engine_event(const GenerationEvent& ev);  // on the strand
  boost::asio::any_io_executor executor() { return ws_.get_executor(); }

 private:
  void on_accept(boost::beast::error_code ec);
  void do_read();
  void on_read(boost::beast::error_code ec, size_t n);
  void handle_event(std::string_view text);
  // A message of TokenizerPool::kOffThreadBytes or more is parsed on the
  // pool (a 900 KB input.append costs milliseconds of JSON parsing, which
  // held up every other connection of this I/O thread); reading pauses
  // until its event is handled, so events keep their order.
  void parse_off_thread(std::string text);
  // An input.append of that size is measured first (realtime_input_probe.h):
  // when it cannot fit, it gets its input_too_large here, unparsed, and
  // true comes back. A refused flood then costs the I/O thread one pass
  // over each message instead of a JSON parse on the cores the streams use.
  bool refuse_unparsed(std::string_view text);
  void dispatch(realtime::ClientEvent ev);
  // Sends `error_event` in answer to the message read last and counts it
  // as refused (refused_input_); cut_off() once the budget is spent.
  void refuse(std::string error_event);
  void cut_off();
  // After a cut-off, once the output is written: close frame 1008, half-close,
  // and drain the socket below the WebSocket layer for at most kLinger or
  // kMaxDrain bytes (as HttpSession::linger_close), then fail().
  void linger_close();
  void linger_read();
  void on_linger_read(boost::beast::error_code ec, size_t n);
  void end_linger();
  void update_session(const nlohmann::json& s);
  // realtime::resolve_params with this server's model, context and priority cap.
  realtime::ResolvedParams resolve(const nlohmann::json& session, const nlohmann::json& overrides) const;
  void append_input(realtime::InputItem item);  // throws EventError input_too_large
  // Throws EventError input_too_large when `item_bytes` more input would not fit.
  void check_input_room(uint64_t item_bytes) const;
  void create_response(const nlohmann::json& overrides);
  void on_prompt_built(realtime::ResolvedParams p, std::vector<int32_t> prompt, std::optional<ApiError> error,
                       size_t n_items);
  void start_response(realtime::ResolvedParams p, std::vector<int32_t> prompt, size_t n_items);
  void finish_response(const GenerationEvent& ev);
  void send(std::string msg);
  void do_write();
  void on_write(boost::beast::error_code ec);
  void begin_close();
  void fail();  // the connection is gone or must go: release everything

  // Unregisters from ServerContext::realtime_sessions; destroyed last (see
  // HttpSession::Registration).
  struct Registration {
    ServerContext& ctx;
    RealtimeSession* self;
    ~Registration();
  };
  Registration registration_;
  // FrameLengthGuard: a 64-bit frame length with its top bit set closes
  // with 1002 at once (ws_frame_guard.h).
  boost::beast::websocket::stream<FrameLengthGuard<boost::beast::tcp_stream>> ws_;
  ServerContext& ctx_;
  Backend& backend_;
  boost::beast::flat_buffer rbuf_;
  bool oversized_ = false;  // the message being read is over body_limit: discarded
  RefusedInput refused_input_;
  bool cut_off_ = false;        // input_flood sent: nothing more is read
  bool lingering_ = false;
  uint64_t drained_ = 0;        // bytes discarded while lingering
  std::unique_ptr<char[]> drain_buf_;
  boost::asio::steady_timer timer_;  // a paced read's wait, then the linger
  const uint64_t engine_session_;
  const std::string id_;

  realtime::Conversation conv_;
  nlohmann::json params_ = nlohmann::json::object();  // session-level <sampling> fields

  // The running response.
  std::shared_ptr<RealtimeRelay> relay_;
  std::shared_ptr<RequestHandle> handle_;
  std::string response_id_;
  uint64_t responses_ = 0;
  bool running_ = false;
  bool preparing_ = false;  // its prompt is being built on the TokenizerPool
  bool return_tokens_ = false;
  bool overflow_ = false;                // cancelled for a slow reader
  bool redirect_pending_ = false;        // start a response when this one ends
  nlohmann::json redirect_overrides_;

  // Output.
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  bool writing_ = false;
  bool accepted_ = false;
  bool close_after_output_ = false;  // session.close: close once the queue drains
  bool closing_ = false;             // close handshake started
  boost::beast::websocket::close_code close_code_ = boost::beast::websocket::close_code::normal;
  bool failed_ = false;              // gone: nothing more is sent or read
};

}  // namespace nexus::server
