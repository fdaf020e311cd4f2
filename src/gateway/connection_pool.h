// ConnectionPool: kept-alive HTTP/1.1 connections to one replica.
//
// A request takes an idle connection if one is left whose peer has not
// closed it (checked with a non-blocking MSG_PEEK: a replica that restarted
// or timed the connection out has sent FIN, and such a socket is dropped
// instead of failing the request), else a new socket that the caller
// connects (connect_endpoints()). After a complete response with keep-alive
// the caller gives it back; at most max_idle are kept. Sockets belong to the
// io_context's plain executor; callers bind their completion handlers to
// their own strand. Thread-safe.
//
// The replica's name is resolved at construction and again by every health
// check (refresh()): a Kubernetes pod's name points at a new address after a
// restart, and names a pod that does not exist yet not at all. A name that
// does not resolve leaves no endpoints; connecting then fails, and the
// health checks and the breaker treat the replica as down until it does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace nexus::gateway {

class ConnectionPool {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using Endpoints = std::vector<boost::asio::ip::tcp::endpoint>;
  // Resolves host:port (blocking, once); resolve_error() says why it failed.
  ConnectionPool(boost::asio::any_io_executor ex, const std::string& host, const std::string& port, size_t max_idle = 256);

  // An idle connection still open at the peer, or nullptr.
  std::unique_ptr<Socket> take_idle();
  // A new, unconnected socket; connect it to endpoints().
  std::unique_ptr<Socket> fresh();
  void give_back(std::unique_ptr<Socket> s);
  void clear();  // closes the idle connections (the replica failed)

  Endpoints endpoints() const;
  // The addresses the name resolves to now; a change drops the idle
  // connections (they lead to the old address). An empty list keeps the last
  // one's error message. Returns whether the list changed.
  bool set_endpoints(Endpoints eps, const std::string& error = "");
  std::string resolve_error() const;  // "" when the last resolution succeeded
  const std::string& host() const { return host_; }
  const std::string& port() const { return port_; }
  uint64_t opened() const;
  uint64_t reused() const;

 private:
  boost::asio::any_io_executor ex_;
  std::string host_, port_;
  size_t max_idle_;
  mutable std::mutex mu_;
  Endpoints endpoints_;
  std::string resolve_error_;
  std::vector<std::unique_ptr<Socket>> idle_;
  uint64_t opened_ = 0, reused_ = 0;
};

}  // namespace nexus::gateway
