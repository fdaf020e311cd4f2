// ProxySession: one client connection of the gateway (internal to
// GatewayServer). Everything it does runs on the client socket's strand;
// upstream sockets come from the replicas' pools and their completion
// handlers are bound to the same strand.
//
// Per request: read it (body_limit), answer the gateway's own routes, else
// run attempts until one answers:
//   choose a replica (available ones not yet tried first; routing_policy.h)
//   -> injected faults (fault_injection.h) -> a pooled or new connection
//   -> write the request -> read the response header -> read the body.
// Nothing reaches the client before the first body bytes of a 2xx stream or
// the whole of a non-streamed answer, so until then a failure (connect
// error, reset, the TTFT timeout, a 5xx, 429, 503 draining) can be retried
// on another replica, with full-jitter backoff and within the retry budget
// (retry_policy.h). A stream's bytes are then relayed as each read brings
// them (one read, one write: a slow client slows its replica's socket, never
// the gateway); if the replica fails after that, the stream ends with an
// OpenAI-style error event and `data: [DONE]` (code replica_failed).
// A request whose replica died with it in flight is retried at most once
// more, and one that killed two replicas is refused for a while
// (query_of_death.h, proxy_query_of_death.cpp).
// proxy_session.cpp holds the client side (requests, the gateway's own
// routes, replies), proxy_attempt.cpp the attempts.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "gateway/client_stream.h"
#include "gateway/gateway_context.h"
#include "gateway/stream_usage.h"
#include "gateway/ws_transcript.h"
#include "server/ws_frames.h"

namespace nexus::gateway {

using server::encode_ws_close;
using server::encode_ws_frame;
using server::WsFrameReader;
using server::WsMessage;
using server::WsOpcode;

class ProxySession : public std::enable_shared_from_this<ProxySession> {
 public:
  // `tls`: the server context (--tls-cert), null for plain HTTP.
  ProxySession(boost::asio::ip::tcp::socket client, GatewayContext& ctx, boost::asio::ssl::context* tls = nullptr);
  ~ProxySession();
  void start();
  // Thread-safe: the gateway stops. A request in flight ends now: a started
  // stream with an error event (server_shutting_down) and [DONE], an
  // unanswered request with a 503; then the connection closes.
  void shutdown();

 private:
  using Clock = std::chrono::steady_clock;
  using Socket = boost::asio::ip::tcp::socket;
  enum class AttemptEnd { Healthy, Failed };
  struct Answer {  // a whole upstream (or injected) response
    int status = 0;
    std::string body, content_type, retry_after;
  };

  // Client side.
  void handshake();  // TLS only, before the first request
  void read_request();
  // body_json_, parsed on first use under util/json_depth.h's bound (a
  // discarded value when the body is not JSON); throws JsonTooDeep.
  nlohmann::ordered_json& body_json();
  void on_header(boost::system::error_code ec);
  void on_request(boost::system::error_code ec);
  void handle_request();
  void respond(int status, const std::string& body, const std::string& content_type = "application/json",
               const std::string& extra_headers = "");
  void write_client(bool then_next_request);
  void close_client();

  // Access (proxy_access.cpp): the key and the tenant's limits; false when
  // the request was answered (401, 429).
  bool admit_request();
  void charge_usage(const std::optional<TokenUsage>& usage);
  void release_tenant();

  // The WebSocket relay (proxy_websocket.cpp): /v1/realtime and the
  // Responses API's WebSocket mode.
  void start_ws_relay(WsProtocol protocol);
  void ws_attempt();
  void write_ws_upgrade();
  void on_ws_header(boost::system::error_code ec);
  void ws_attempt_failed(const std::string& detail);
  void ws_attempts_exhausted();
  void relay_to_client();
  void relay_to_replica();
  void write_to_replica();
  void end_tunnel();
  void end_tunnel_from_replica();
  void tls_goodbye();
  // WebSocket failover (proxy_websocket_failover.cpp): the relay watches the
  // frames both ways (the transcript), and a replica that dies moves the
  // session to another one.
  // Fills up_out_ with what to forward; false when a message is refused
  // (admit_client_message: nothing of these bytes goes on).
  bool observe_client(std::string_view bytes);
  void observe_replica(std::string_view bytes);
  void upstream_lost(const std::string& detail);
  void failover_connected();
  void failover_failed();
  // An `error` event (the protocol's shape) and a close frame (`close_code`),
  // then the end of the tunnel.
  void end_session(const std::string& code, const std::string& message, uint16_t close_code = 1011);
  // While the tunnel is open: a replica whose breaker opened (it stopped
  // answering: frozen, its connection still open) is treated as dead, so
  // the session moves (proxy_websocket_failover.cpp).
  void watch_tunnel();
  // end_session() for a session whose client message was refused.
  void end_refused_session();

  // Queries of death (proxy_query_of_death.cpp, query_of_death.h).
  uint64_t request_fingerprint();
  // A request known as a query of death: answered 502 (true).
  bool refuse_query_of_death();
  // The replica's connection died with the request sent: a death of the
  // request, unless the replica was failing already; then the retry, or
  // the 502 of a request that killed two replicas.
  void replica_died(const std::string& detail);
  // Records a death of this request on replica_; true when it must not go
  // to another replica (its second death, or a known query of death).
  bool request_died();
  void answer_query_of_death();
  // Realtime: a client message that is a known query of death ends the
  // session before the replica gets it (false: the caller stops).
  bool admit_client_message(std::string_view payload);
  void refuse_client_message();
  // Realtime: the replica died with these messages in flight; true when the
  // session must not move again (the same messages killed two replicas).
  bool session_killed_two_replicas();

  // Attempts.
  void start_attempt();
  void begin_attempt(size_t replica, Admission admission);
  void connect_upstream();
  // up_req_'s request line for replica_; true when the client's credential
  // stays with the gateway (client_credential(): not passed on).
  bool begin_upstream_request();
  void write_upstream();
  void read_upstream_header();
  void on_upstream_header(boost::system::error_code ec);
  void read_upstream_body();
  void on_upstream_body(boost::system::error_code ec);
  void relay(size_t n);
  void stream_client_gone();
  void on_answer(Answer a);
  void attempt_failed(RetryReason reason, const std::string& detail, bool retry = true);
  // The attempt's deadline passed, or its replica's breaker opened (wait_deadline()).
  void attempt_timed_out();
  // An HTTP attempt that has sent nothing to the client yet: its wait
  // watches the replica's breaker.
  bool watching_breaker() const { return attempt_open_ && !started_ && replica_; }
  void end_attempt(AttemptEnd how, bool keep_connection);
  void retry_or_give_up(RetryReason reason);
  void give_up();
  void stream_broken(const std::string& why);
  void finish(Outcome outcome);
  // The access log's line for this request, logfmt (key=value, values with
  // spaces or quotes quoted): method, path, status, replica ("-" when
  // none), ms (from the request read to this line), attempts (replicas
  // tried), outcome (the metrics' outcome label, "-" for the gateway's own
  // answers), tenant (with --api-keys), then `note` (already key=value).
  void log_request(int status, std::string_view note = {});
  // With --cors-allow-origin: sets cors_head_ for this request; answers a
  // preflight (204, or 403 from another origin) and returns true then.
  bool answer_cors();
  // The current operation's deadline (connect, TTFT, stream idle): when it
  // passes, timed_out_ is set and up_ closed, failing its pending operation.
  void arm_deadline(std::chrono::milliseconds d);
  void wait_deadline();
  void disarm_deadline() {
    deadline_armed_ = false;
    deadline_waiting_ = false;
    ++deadline_seq_;
    deadline_.cancel();
  }
  void end_for_shutdown();

  GatewayContext& ctx_;
  ClientStream client_;
  boost::asio::steady_timer client_timer_, deadline_, backoff_;
  boost::beast::flat_buffer client_buf_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> req_parser_;
  boost::beast::http::request<boost::beast::http::string_body> req_;
  std::string out_;
  std::string cors_head_;  // the request's CORS response headers, "Name: value\r\n" each ("" when none)
  std::mt19937_64 rng_;
  bool writing_ = false;           // a write to the client is in flight
  bool upstream_pending_ = false;  // an operation on up_ is in flight
  bool stopping_ = false;          // shutdown(): resumed when those complete

  // The request being proxied.
  bool proxying_ = false;
  bool keep_alive_ = true;
  bool chunked_ = true;  // HTTP/1.1 client: a stream in chunks
  std::vector<uint64_t> prefix_;
  // The body as JSON, parsed once by whichever reads it first (the
  // tenant's priority cap, the usage tap, the prefix policy) and dropped
  // before the attempts start: body_json().
  std::optional<nlohmann::ordered_json> body_json_;
  std::optional<size_t> tenant_;          // --api-keys: the admitted tenant
  bool tenant_in_flight_ = false;         // counted in its in-flight gauge
  std::optional<StreamUsageTap> usage_tap_;  // a stream's usage chunk (stream_usage.h)
  Clock::time_point received_;
  int attempts_ = 0;
  int deaths_ = 0;                          // replicas that died with it in flight (query_of_death.h)
  std::optional<uint64_t> fingerprint_;     // of this request, once needed
  std::optional<Outcome> outcome_;  // this request's, once finish()ed (for the log)
  std::vector<bool> tried_;
  std::optional<Answer> last_answer_;  // the last retryable answer, relayed if nothing better comes
  std::string last_error_;
  bool last_timed_out_ = false;

  // The current attempt.
  Replica* replica_ = nullptr;  // the last replica tried
  bool attempt_open_ = false;
  bool probe_ = false;
  std::unique_ptr<Socket> up_;
  bool up_reused_ = false;
  boost::beast::flat_buffer up_buf_;
  boost::beast::http::request<boost::beast::http::string_body> up_req_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> res_parser_;
  std::array<char, 16 * 1024> chunk_{};
  std::string body_;
  // The realtime relay: the replica's answer to the upgrade, then bytes
  // both ways (tunnel_ while they flow).
  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> ws_parser_;
  std::string to_replica_;  // the client's bytes, as read
  std::string up_out_;      // what goes to the replica (write_to_replica)
  bool tunnel_ = false;
  bool client_reading_ = false;  // relay_to_replica's read is pending
  bool tls_goodbye_ = false;     // close_notify to send once that read is cancelled
  // Failover state: up_gen_ counts the session's upstream connections (a
  // handler of an earlier one does nothing); up_live_ while writes to up_
  // may go; the client's read loop parks while it may not.
  WsProtocol ws_protocol_ = WsProtocol::Realtime;
  std::unique_ptr<WsTranscript> transcript_;
  bool reencode_client_ = false;  // after a move, where the transcript rewrites: client messages re-encoded whole
  std::optional<WsFrameReader> client_frames_, replica_frames_;
  std::unique_ptr<Socket> dead_up_;  // the failed upstream, kept until its handlers ran
  std::string replay_out_, held_;    // the replay's frames; client bytes read before it was written
  uint64_t up_gen_ = 0;
  bool up_live_ = false;
  bool failing_over_ = false;  // from the replica's death to the new one's 101
  bool replayed_ = true;       // false until the replay is built: client messages go to it, not forwarded
  bool skip_partial_ = false;  // the client's message in progress at the replay: re-encoded once whole
  bool client_parked_ = false;
  bool replica_closed_ = false;  // the replica sent its close frame (an orderly end, not a failure)
  int failovers_ = 0;
  // Realtime queries of death: fingerprints of the client messages the
  // replica got since its last message (in flight), those carried by the
  // replay of the last move, and whether the new replica has answered
  // anything past that replay yet.
  std::vector<uint64_t> in_flight_messages_, replayed_messages_;
  Clock::time_point last_forward_at_{};
  bool replay_unanswered_ = false;
  bool message_refused_ = false;  // a client message was a known query of death: the session ends
  // Why (with message_refused_): a known query of death; or, after a move,
  // where client messages are re-encoded, one past the reader's limit or
  // frames it cannot read (neither counted as a query of death).
  enum class ClientRefusal { QueryOfDeath, TooLarge, BadFrames } refusal_ = ClientRefusal::QueryOfDeath;
  boost::asio::steady_timer tunnel_watch_;  // watch_tunnel()'s
  bool breaker_cut_ = false;  // the relay closed the replica's connection: its breaker opened
  bool streaming_ = false;
  int interim_answers_ = 0;  // 100 Continue answers skipped in this attempt
  bool started_ = false;  // bytes of the response reached the client
  bool blank_line_last_ = true;
  bool timed_out_ = false;
  bool breaker_opened_ = false;  // the attempt ended because its replica's breaker opened
  uint64_t deadline_seq_ = 0;    // the pending wait's (a wait of an older number does nothing)
  Clock::time_point deadline_at_;
  bool deadline_armed_ = false;
  bool deadline_waiting_ = false;  // a wait is pending on deadline_
  Clock::time_point sent_at_;
  double upstream_seconds_ = 0;  // the answering replica's own time to first byte
};

}  // namespace nexus::gateway
