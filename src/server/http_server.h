// HttpServer: the HTTP/1.1 front of `nexus serve` (Boost.Beast).
//
// One acceptor and N I/O threads share one io_context; each connection is an
// HttpSession (http_session.h) serialised by its own strand. Connections are
// kept alive across requests, streamed (chunked SSE) or not. Limits:
//   body_limit         request bodies above it get 413 and the connection is
//                      closed (after draining what the client still sends)
//   max_connections    open connections (HTTP and realtime) at most; one
//                      accepted beyond it gets 503 too_many_connections and
//                      is closed (after a short drain; refusals beyond
//                      kMaxRefusing at once are closed at accept, no reply)
//   idle_timeout       a connection waiting for the first byte of a request
//                      this long is closed, without a response
//   header_timeout     a request header not complete this long after its
//                      first byte: 408 request_timeout, connection closed
//   body_timeout       a request body not complete this long after its
//                      header: 408 request_timeout, connection closed
//   write_timeout      a write that does not complete within this closes it
//   max_pending_bytes  output queued for a slow client above this cancels
//                      its generation and closes the connection, so the
//                      engine never waits for a client
//   request target     over 8 KiB: 414; header over 16 KiB: 431
//                      (request_framing.h)
// HEAD works wherever GET does; cors_allow_origins turns on CORS (cors.h,
// request_dispatch.h).
// GET /v1/realtime upgrades to a WebSocket on the same port (a realtime
// session, realtime_session.h; protocol: docs/protocol.md). body_limit is its
// message size limit, max_pending_bytes its outgoing buffer, and
// ws_ping_interval the silence after which the server pings (a peer silent
// for another interval is disconnected).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/request_priority.h"

namespace nexus::server {

class Backend;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                               // 0 = an ephemeral port (see port())
  int io_threads = 2;
  size_t body_limit = 1 << 20;                        // bytes
  // 0 = derived from RLIMIT_NOFILE at construction: its soft limit less 64
  // (descriptors the process needs besides connections), at least 16.
  int max_connections = 0;
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds header_timeout{30'000};
  std::chrono::milliseconds body_timeout{60'000};
  // Workers that tokenize inputs of TokenizerPool::kOffThreadBytes or more
  // (tokenizer_pool.h).
  int tokenizer_threads = 2;
  std::chrono::milliseconds write_timeout{60'000};
  size_t max_pending_bytes = 1 << 20;
  std::chrono::milliseconds ws_ping_interval{20'000};
  // Origins browsers may call from (`--cors-allow-origin`), "*" for any;
  // empty = no CORS (OPTIONS gets 405, no Access-Control-* header is sent).
  std::vector<std::string> cors_allow_origins;
  // `--max-request-priority`: the highest `priority` a request (HTTP or
  // realtime) may ask for; above it 400 priority_above_cap
  // (server/request_priority.h).
  int32_t max_request_priority = kDefaultMaxRequestPriority;
  // `--responses-store-mib`: the budget of the stored responses
  // (responses/response_store.h); `--strict-tools`: a hosted tool in a
  // Responses request is a 400 instead of being left out.
  size_t responses_store_bytes = size_t{256} << 20;
  bool strict_tools = false;
  // `--api-key`: requests must carry `Authorization: Bearer KEY` (else 401
  // invalid_api_key; server/api_key.h says which paths stay open). Empty =
  // no check.
  std::string api_key;
  // Called once per request ("POST /v1/completions 200 12.3ms") from an I/O
  // thread; must be thread-safe. Empty = no log.
  std::function<void(const std::string&)> log;
};

class HttpServer {
 public:
  // Binds and listens right away (throws nexus::Error when it cannot), so
  // port() is valid before start(). `backend` must outlive the server.
  HttpServer(Backend& backend, HttpServerOptions opts);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void start();  // launches the I/O threads and starts accepting
  // Stops accepting, cancels running generations, closes every connection
  // and joins the I/O threads. Idempotent. After it returns the server posts
  // nothing more and touches the backend no more.
  void stop();
  // Starts a graceful shutdown (SIGTERM): from now on every request but GET
  // /metrics gets 503 server_shutting_down (Retry-After: 1, connection
  // closed after it), including WebSocket upgrades, and realtime sessions
  // refuse new responses with an error event; generations already running
  // go on. The caller waits for in_flight() (and the engine) to reach zero,
  // then calls stop().
  void drain();
  // HTTP generations submitted whose response is not yet fully written.
  int32_t in_flight() const;

  uint16_t port() const;
  const std::string& host() const;
  uint64_t connections_accepted() const;
  // accept() calls that failed (out of descriptors, ...); after each the
  // acceptor waits 10 ms doubling to 1 s before it tries again, instead of
  // retrying at once (which spins a core while the limit holds).
  uint64_t accept_errors() const;
  uint64_t requests_served() const;  // requests answered (or abandoned by their client)
  // Connections refused for max_connections (503 or closed at accept).
  uint64_t connections_refused() const;
  int max_connections() const;  // the cap in force (max_connections resolved)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus::server
