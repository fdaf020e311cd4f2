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
  // Resolves host:port once (throws nexus::Error when it cannot).
  ConnectionPool(boost::asio::any_io_executor ex, const std::string& host, const std::string& port, size_t max_idle = 256);

  // An idle connection still open at the peer, or nullptr.
  std::unique_ptr<Socket> take_idle();
  // A new, unconnected socket; connect it to endpoints().
  std::unique_ptr<Socket> fresh();
  void give_back(std::unique_ptr<Socket> s);
  void clear();  // closes the idle connections (the replica failed)

  const std::vector<boost::asio::ip::tcp::endpoint>& endpoints() const { return endpoints_; }
  uint64_t opened() const;
  uint64_t reused() const;

 private:
  boost::asio::any_io_executor ex_;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;
  size_t max_idle_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Socket>> idle_;
  uint64_t opened_ = 0, reused_ = 0;
};

}  // namespace nexus::gateway
