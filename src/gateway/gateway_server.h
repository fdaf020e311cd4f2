// GatewayServer: `nexus gateway`, one OpenAI-compatible endpoint over many
// `nexus serve` replicas (docs/gateway.md).
//
// It serves what a replica serves (POST /v1/completions and
// /v1/chat/completions, streamed or not, GET /v1/models, ...: every path but
// the gateway's own is relayed to a replica) plus its own GET /health
// (200 while some replica can take requests, else 503) and GET /metrics
// (gateway_metrics.h). It talks to replicas only over HTTP/1.1, through
// kept-alive pooled connections (connection_pool.h), and relays a stream's
// SSE bytes as each read brings them. /v1/realtime WebSocket sessions are
// relayed byte for byte to one replica each (proxy_websocket.cpp) in this
// version. With --tls-cert/--tls-key it speaks HTTPS (client_stream.h);
// with --api-keys it checks keys and per-tenant limits (tenant_limiter.h).
//
// Layers: routing (load_state.h, routing_policy.h, prefix_affinity.h) and
// execution (health_checker.h, circuit_breaker.h, retry_policy.h,
// fault_injection.h), joined per client connection by proxy_session.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/api_keys.h"
#include "gateway/circuit_breaker.h"
#include "gateway/fault_injection.h"
#include "gateway/health_checker.h"
#include "gateway/query_of_death.h"
#include "gateway/retry_policy.h"
#include "gateway/routing_policy.h"

namespace nexus::gateway {

struct GatewayOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8090;                // 0 = an ephemeral port (see port())
  std::vector<std::string> replicas;   // http://host:port URLs (at least one, or a replicas_from source)
  // DNS discovery (dns_discovery.h): "dns:NAME:PORT" sources, each resolved
  // every dns_interval.
  std::vector<std::string> replicas_from;
  std::chrono::milliseconds dns_interval{5'000};
  // Threads running the io_context. One is the default: every connection's
  // handlers then run on the thread that got its readiness, with no hop
  // between threads (TTFT added on loopback 0.105 ms with 1 against
  // 0.13-0.15 with 2, docs/benchmarks.md) and one thread already relays
  // 13-19k non-streamed requests/s; raise it when the gateway's own CPU
  // saturates a core.
  int io_threads = 1;
  PolicyKind policy = PolicyKind::LeastLoad;
  double prefix_threshold = 4;         // load-score units (about requests)
  HealthOptions health;
  BreakerOptions breaker;
  RetryOptions retry;
  std::chrono::milliseconds connect_timeout{1'000};
  // An attempt whose first response byte (a stream's first event, a
  // non-streamed response's whole body) has not come by then is cancelled
  // and moved to another replica.
  std::chrono::milliseconds ttft_timeout{30'000};
  // A started stream silent for this long ends with an error event.
  std::chrono::milliseconds stream_idle_timeout{30'000};
  std::chrono::milliseconds client_idle_timeout{60'000};
  size_t body_limit = 1 << 20;         // request body bytes (413 above)
  size_t response_limit = 64 << 20;    // a non-streamed response's bytes
  // Requests that kill replicas: how long one is suspected after a death,
  // and refused once it killed a second replica (query_of_death.h).
  QueryOfDeathOptions query_of_death;
  std::vector<FaultRule> faults;
  // `--tls-cert`, `--tls-key`: PEM files (the certificate chain, the private
  // key); both set = HTTPS on the listening port (TLS 1.2 and 1.3, OpenSSL's
  // default ciphers), both empty = plain HTTP. Replicas are still reached
  // over plain HTTP (the gateway terminates TLS).
  std::string tls_cert, tls_key;
  // `--api-keys`: every proxied request needs one of these keys as
  // `Authorization: Bearer KEY` (401 otherwise), within its tenant's limits
  // (429 otherwise; tenant_limiter.h). GET /health and /metrics stay open.
  // The client's Authorization header is not passed on to the replicas.
  std::optional<ApiKeyTable> api_keys;
  // `--replica-api-key`: sent to every replica as `Authorization: Bearer
  // KEY` (for replicas run with `nexus serve --api-key`), replacing the
  // client's. Empty = none (without --api-keys the client's goes through).
  std::string replica_api_key;
  // `--cors-allow-origin` (server/cors.h, as `nexus serve` takes it): the
  // gateway answers CORS preflights itself (before any key check: they
  // carry none) and puts its own CORS headers on every response, the
  // replicas' Access-Control-* and Vary headers replaced. Empty = off:
  // OPTIONS and the replicas' CORS headers pass through unchanged.
  std::vector<std::string> cors_allow_origins;
  // One access-log line per request, logfmt ("method=POST
  // path=/v1/completions status=200 replica=127.0.0.1:8081 ms=12.3
  // attempts=1 outcome=success", ProxySession::log_request), from an I/O
  // thread; must be thread-safe. Empty = no log.
  std::function<void(const std::string&)> log;
};

class GatewayServer {
 public:
  // Parses the replica URLs and binds (throws nexus::Error when it cannot).
  explicit GatewayServer(GatewayOptions opts);
  ~GatewayServer();  // stop()
  GatewayServer(const GatewayServer&) = delete;
  GatewayServer& operator=(const GatewayServer&) = delete;

  void start();  // I/O threads, health checkers, accepting
  // Graceful shutdown: new requests get 503 server_shutting_down
  // (Retry-After: 1, connection closed), requests in flight go on; the
  // caller waits for in_flight() to reach zero, then calls stop().
  void drain();
  int32_t in_flight() const;
  // Closes everything and joins the threads. Idempotent.
  void stop();

  uint16_t port() const;
  const std::string& host() const;
  bool tls() const;  // HTTPS

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus::gateway
