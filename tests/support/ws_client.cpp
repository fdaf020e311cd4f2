#include "support/ws_client.h"

#include <poll.h>

#include <functional>
#include <stdexcept>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

namespace nexus::test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

struct WsClient::Impl {
  std::shared_ptr<net::io_context> ioc;
  websocket::stream<tcp::socket> ws;
  beast::flat_buffer buf;
  std::chrono::milliseconds timeout;
  int pings = 0;
  std::function<void()> on_ping;  // after each ping is counted

  Impl(std::shared_ptr<net::io_context> c, std::chrono::milliseconds t) : ioc(std::move(c)), ws(*ioc), timeout(t) {}

  // Runs one async operation to completion or throws after `timeout`.
  template <class Start>
  beast::error_code run(Start&& start, const char* what) {
    bool done = false;
    beast::error_code err;
    start([&](beast::error_code ec) {
      done = true;
      err = ec;
    });
    const auto end = std::chrono::steady_clock::now() + timeout;
    ioc->restart();
    while (!done && std::chrono::steady_clock::now() < end) ioc->run_one_for(std::chrono::milliseconds(50));
    if (!done) {
      beast::error_code ignored;
      beast::get_lowest_layer(ws).close(ignored);
      ioc->restart();
      while (!done) ioc->run_one();
      throw std::runtime_error(std::string(what) + ": timed out");
    }
    return err;
  }
};

WsClient::WsClient(const std::string& host, uint16_t port, const std::string& target,
                   std::chrono::milliseconds timeout, std::shared_ptr<net::io_context> ioc,
                   const std::string& authorization)
    : impl_(std::make_unique<Impl>(ioc ? std::move(ioc) : std::make_shared<net::io_context>(), timeout)) {
  auto& ws = impl_->ws;
  const tcp::endpoint ep(net::ip::make_address(host), port);
  auto ec = impl_->run([&](auto h) { beast::get_lowest_layer(ws).async_connect(ep, h); }, "connect");
  if (ec) throw std::runtime_error("connect: " + ec.message());
  beast::get_lowest_layer(ws).set_option(tcp::no_delay(true));
  ws.control_callback([this](websocket::frame_type kind, beast::string_view) {
    if (kind != websocket::frame_type::ping) return;
    ++impl_->pings;
    if (impl_->on_ping) impl_->on_ping();
  });
  ws.read_message_max(64u << 20);
  if (!authorization.empty())
    ws.set_option(websocket::stream_base::decorator(
        [authorization](websocket::request_type& req) { req.set(beast::http::field::authorization, authorization); }));
  ec = impl_->run([&](auto h) { ws.async_handshake(host, target, h); }, "handshake");
  if (ec) throw std::runtime_error("handshake: " + ec.message());
}

WsClient::~WsClient() {
  beast::error_code ignored;
  beast::get_lowest_layer(impl_->ws).close(ignored);
}

void WsClient::send_text(const std::string& text) {
  impl_->ws.text(true);
  auto ec = impl_->run([&](auto h) { impl_->ws.async_write(net::buffer(text), [h](auto e, size_t) { h(e); }); },
                       "write");
  if (ec) throw std::runtime_error("write: " + ec.message());
}

void WsClient::send_binary(const std::string& bytes) {
  impl_->ws.binary(true);
  auto ec = impl_->run([&](auto h) { impl_->ws.async_write(net::buffer(bytes), [h](auto e, size_t) { h(e); }); },
                       "write");
  if (ec) throw std::runtime_error("write: " + ec.message());
}

std::optional<std::string> WsClient::recv() {
  impl_->buf.consume(impl_->buf.size());
  auto ec = impl_->run([&](auto h) { impl_->ws.async_read(impl_->buf, [h](auto e, size_t) { h(e); }); }, "read");
  if (ec == websocket::error::closed) {
    close_code_ = impl_->ws.reason().code;
    return std::nullopt;
  }
  if (ec) {
    close_code_ = -1;
    return std::nullopt;
  }
  return beast::buffers_to_string(impl_->buf.data());
}

nlohmann::json WsClient::recv_json() {
  auto m = recv();
  if (!m) throw std::runtime_error("recv_json: the connection was closed (code " + std::to_string(close_code_) + ")");
  return nlohmann::json::parse(*m);
}

nlohmann::json WsClient::recv_until(const std::string& type, std::vector<nlohmann::json>* skipped) {
  for (;;) {
    nlohmann::json j = recv_json();
    if (j.value("type", "") == type) return j;
    if (skipped) skipped->push_back(std::move(j));
  }
}

int WsClient::wait_closed() {
  while (recv()) {
  }
  return close_code_;
}

int WsClient::pings_received() const { return impl_->pings; }

std::optional<std::string> WsClient::recv_after_pings(int n, const std::string& then_send) {
  Impl& m = *impl_;
  auto text = std::make_shared<std::string>(then_send);
  // Beast forbids initiating operations inside the control callback: post.
  auto send = [&m, text] {
    m.ws.text(true);
    m.ws.async_write(net::buffer(*text), [text](beast::error_code, size_t) {});
  };
  m.on_ping = [&m, n, send] {
    if (m.pings == n) net::post(*m.ioc, send);
  };
  if (m.pings >= n) net::post(*m.ioc, send);
  std::optional<std::string> r;
  try {
    r = recv();
  } catch (...) {
    m.on_ping = nullptr;
    throw;
  }
  m.on_ping = nullptr;
  return r;
}

bool WsClient::wait_peer_closed(std::chrono::milliseconds timeout) {
  pollfd p{beast::get_lowest_layer(impl_->ws).native_handle(), POLLRDHUP, 0};
  const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  return r == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void WsClient::close() {
  impl_->run([&](auto h) { impl_->ws.async_close(websocket::close_code::normal, h); }, "close");
}

void WsClient::drop() {
  beast::error_code ignored;
  beast::get_lowest_layer(impl_->ws).close(ignored);
}

}  // namespace nexus::test
