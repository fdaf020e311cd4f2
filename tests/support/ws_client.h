// WsClient: a small synchronous WebSocket client for the realtime tests
// (Boost.Beast). Every network wait is bounded (default 30 s) and throws
// std::runtime_error on timeout, so a broken server fails a test instead of
// hanging it. Clients may share one io_context (e.g. a thousand idle
// connections); each call runs it only until its own operation completes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

namespace nexus::test {

class WsClient {
 public:
  // Connects and completes the handshake (throws on failure).
  // `authorization`: the upgrade request's Authorization header ("" none).
  WsClient(const std::string& host, uint16_t port, const std::string& target = "/v1/realtime",
           std::chrono::milliseconds timeout = std::chrono::seconds(30),
           std::shared_ptr<boost::asio::io_context> ioc = nullptr, const std::string& authorization = "");
  ~WsClient();
  WsClient(const WsClient&) = delete;
  WsClient& operator=(const WsClient&) = delete;

  void send_text(const std::string& text);
  void send_json(const nlohmann::json& j) { send_text(j.dump()); }
  void send_binary(const std::string& bytes);
  // The next message (pings are answered meanwhile); nullopt once the server
  // closed the connection (close_code() then says how).
  std::optional<std::string> recv();
  // The next message as JSON; throws when closed or not JSON.
  nlohmann::json recv_json();
  // Reads events until one of `type` (returned); the others are appended to
  // `skipped` when given.
  nlohmann::json recv_until(const std::string& type, std::vector<nlohmann::json>* skipped = nullptr);
  // Reads (and discards) until the server closes; returns its close code,
  // or -1 when the TCP connection ended without a close frame.
  int wait_closed();
  int close_code() const { return close_code_; }
  int pings_received() const;
  // Reads until the server's pings reach `n` in all (answered meanwhile),
  // then sends `then_send` and returns the next message: a client still
  // connected after those pings gets its answer. nullopt once closed; throws
  // after the client's timeout.
  std::optional<std::string> recv_after_pings(int n, const std::string& then_send);
  // Waits, without reading (so no ping is answered), until the server closed
  // the TCP connection; false after `timeout`.
  bool wait_peer_closed(std::chrono::milliseconds timeout);
  void close();  // the closing handshake (normal closure)
  void drop();   // abrupt TCP close, no close frame

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int close_code_ = -1;
};

}  // namespace nexus::test
