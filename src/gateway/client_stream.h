// ClientStream: the gateway's side of a client connection, plain TCP or TLS
// (`--tls-cert`/`--tls-key`, terminated here with OpenSSL through
// Boost.Asio's ssl::stream). It is an AsyncStream either way, so the proxy
// session's Beast reads and Asio writes are the same code for both; the
// choice is one branch per read or write.
//
// TLS: the server handshake runs before the first request (handshake()).
// close() closes the socket without a TLS close_notify exchange (an
// orderly TLS shutdown would wait on the peer; HTTP/1.1 framing already
// tells the client where each response ends). A WebSocket tunnel the
// replica ended gets the orderly one (async_shutdown, bounded by the
// caller's timer): a WSS client's own close handshake ends with a TLS
// shutdown and reads a bare TCP close as "stream truncated".
#pragma once

#include <memory>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

namespace nexus::gateway {

class ClientStream {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using executor_type = Socket::executor_type;

  // `tls`: null for plain HTTP; else it must outlive the stream.
  ClientStream(Socket s, boost::asio::ssl::context* tls)
      : plain_(tls ? Socket(s.get_executor()) : std::move(s)),
        tls_(tls ? std::make_unique<boost::asio::ssl::stream<Socket>>(std::move(s), *tls) : nullptr) {}

  bool tls() const { return tls_ != nullptr; }
  Socket& tcp() { return tls_ ? tls_->next_layer() : plain_; }
  executor_type get_executor() { return tcp().get_executor(); }

  template <class Handler>
  void async_handshake(Handler&& h) {
    tls_->async_handshake(boost::asio::ssl::stream_base::server, std::forward<Handler>(h));
  }
  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& b, Handler&& h) {
    if (tls_) return tls_->async_read_some(b, std::forward<Handler>(h));
    plain_.async_read_some(b, std::forward<Handler>(h));
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& b, Handler&& h) {
    if (tls_) return tls_->async_write_some(b, std::forward<Handler>(h));
    plain_.async_write_some(b, std::forward<Handler>(h));
  }
  // TLS only, with no other operation pending: sends close_notify and
  // waits for the client's.
  template <class Handler>
  void async_shutdown(Handler&& h) {
    tls_->async_shutdown(std::forward<Handler>(h));
  }
  void close() {
    boost::system::error_code ignored;
    tcp().shutdown(Socket::shutdown_both, ignored);
    tcp().close(ignored);
  }

 private:
  Socket plain_;  // the connection, or (TLS) an unused closed socket
  std::unique_ptr<boost::asio::ssl::stream<Socket>> tls_;
};

}  // namespace nexus::gateway
