// HttpTransport: HTTP/1.1 + SSE streaming (Boost.Beast) of any API
// api_wire.h knows (OpenAI completions, chat, Responses; Anthropic Messages).
//
// Every request is a streamed POST that asks for the server's own token
// counts (api_wire.h). The time of every read that completes an SSE event
// carrying text is recorded as a token arrival.
//
// Connection modes:
//   keep_alive = true   one connection reused across this object's requests
//                       (a stale one that fails before any response byte is
//                       reopened once, as HTTP clients do);
//   keep_alive = false  a new TCP connection per request ("Connection: close").
// An https:// server: each connection's TLS handshake is part of its connect
// time (tls_client.h).
// Every network wait is bounded by the request's deadline (start + timeout).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "loadgen/tls_client.h"
#include "loadgen/transport.h"
#include "loadgen/url.h"

namespace nexus::loadgen {

struct HttpTransportOptions {
  ServerUrl server;
  bool keep_alive = true;
  std::chrono::milliseconds timeout{300'000};  // per request, connect included
  std::string api_key;                          // "" = no Authorization header
  // For an https:// server: the TLS client context (make_tls_client_context),
  // shared by every connection. Null = plain TCP (server.tls must be false).
  std::shared_ptr<boost::asio::ssl::context> tls;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body
};

struct HttpReply {
  ErrorKind error = ErrorKind::None;
  int status = 0;
  std::string body;
  std::string error_message;
};

class HttpTransport final : public Transport {
 public:
  explicit HttpTransport(HttpTransportOptions opts);
  ~HttpTransport() override;

  RequestResult run_request(const RequestSpec& req) override;
  uint64_t connections_opened() const override;

  // A plain (non-streaming) GET, e.g. /v1/models for the preflight.
  HttpReply get(const std::string& target);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

TransportFactory http_transport_factory(HttpTransportOptions opts);

}  // namespace nexus::loadgen
