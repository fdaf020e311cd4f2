// The bench's client connection, plain TCP or TLS (an https:// --url):
// OpenSSL through Boost.Asio's ssl::stream, with SNI and the server's
// certificate verified against the system's CAs, a --cacert file, or not at
// all (--insecure, for a self-signed test certificate). One AsyncStream
// either way, so the HTTP and WebSocket transports' Beast code is the same
// for both (https:// and wss://).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/role.hpp>

namespace nexus::loadgen {

struct TlsClientOptions {
  bool insecure = false;  // skip certificate verification
  std::string ca_file;    // PEM CA bundle ("" = the system's)
};

// Throws nexus::Error when the CA file cannot be used.
std::shared_ptr<boost::asio::ssl::context> make_tls_client_context(const TlsClientOptions& o);

class ClientConnection {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using executor_type = Socket::executor_type;

  // `tls`: null for plain TCP.
  ClientConnection(boost::asio::io_context& ioc, std::shared_ptr<boost::asio::ssl::context> tls)
      : ioc_(ioc), tls_ctx_(std::move(tls)), plain_(ioc) {
    reset();
  }

  bool tls() const { return tls_ctx_ != nullptr; }
  Socket& tcp() { return tls_ ? tls_->next_layer() : plain_; }
  executor_type get_executor() { return tcp().get_executor(); }

  // A fresh socket (and TLS state) for the next connection.
  void reset() {
    if (tls_ctx_) tls_ = std::make_unique<boost::asio::ssl::stream<Socket>>(ioc_, *tls_ctx_);
  }
  // Sets SNI and the name the certificate must carry; false when OpenSSL
  // refused the name.
  bool set_server_name(const std::string& host);

  template <class Handler>
  void async_handshake(Handler&& h) {
    tls_->async_handshake(boost::asio::ssl::stream_base::client, std::forward<Handler>(h));
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
  void close() {
    boost::system::error_code ignored;
    tcp().shutdown(Socket::shutdown_both, ignored);
    tcp().close(ignored);
  }

 private:
  boost::asio::io_context& ioc_;
  std::shared_ptr<boost::asio::ssl::context> tls_ctx_;
  Socket plain_;
  std::unique_ptr<boost::asio::ssl::stream<Socket>> tls_;
};

// What a WebSocket stream over a ClientConnection (websocket::stream<
// ClientConnection&>, wss:// and ws://) does when it closes: Beast finds
// these by argument-dependent lookup. The socket is closed at once (for
// TLS without close_notify: the WebSocket closing handshake has already
// said goodbye, and a bench connection carries nothing after it).
inline void beast_close_socket(ClientConnection& c) { c.close(); }  // (its timeout path)

inline void teardown(boost::beast::role_type, ClientConnection& c, boost::system::error_code& ec) {
  c.close();
  ec = {};
}

template <class TeardownHandler>
void async_teardown(boost::beast::role_type, ClientConnection& c, TeardownHandler&& handler) {
  c.close();
  boost::asio::post(c.get_executor(), [h = std::forward<TeardownHandler>(handler)]() mutable {
    h(boost::system::error_code{});
  });
}

}  // namespace nexus::loadgen
