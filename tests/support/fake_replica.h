// FakeReplica: a loopback HTTP/1.1 server that stands in for `nexus serve`
// behind the gateway, for tests of replicas that misbehave (answers no
// replica should give). It answers the gateway's probes itself (GET
// /health 200, GET /load idle) and hands every other request to the test's
// handler, which writes what it likes to the socket and says whether the
// connection goes on. One thread accepts; each connection has a thread of
// its own; the destructor shuts every socket down and joins them (a
// handler must end once its writes fail). Header-only.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace nexus::test {

class FakeReplica {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  // Returns true to keep the connection for another request.
  using Handler = std::function<bool(Socket&, const Request&)>;

  explicit FakeReplica(Handler handler) : handler_(std::move(handler)), acceptor_(ioc_) {
    namespace net = boost::asio;
    const net::ip::tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    acceptor_.non_blocking(true);
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~FakeReplica() {
    stop_ = true;
    accept_thread_.join();
    {
      std::lock_guard lock(mu_);
      for (auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
  }
  FakeReplica(const FakeReplica&) = delete;
  FakeReplica& operator=(const FakeReplica&) = delete;

  uint16_t port() const { return port_; }
  int requests() const { return requests_.load(); }  // handled (probes excluded)

  // Writes `bytes`; false once the peer is gone.
  static bool write(Socket& s, const std::string& bytes) {
    boost::system::error_code ec;
    boost::asio::write(s, boost::asio::buffer(bytes), ec);
    return !ec;
  }

 private:
  void accept_loop() {
    while (!stop_) {
      boost::system::error_code ec;
      Socket s(ioc_);
      acceptor_.accept(s, ec);
      if (ec) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      s.non_blocking(false);
      auto sp = std::make_shared<Socket>(std::move(s));
      std::lock_guard lock(mu_);
      sockets_.push_back(sp);
      threads_.emplace_back([this, sp] {
        serve(*sp);
        ::shutdown(sp->native_handle(), SHUT_RDWR);  // the gateway reads the end (closed with the object)
      });
    }
  }

  void serve(Socket& s) {
    namespace http = boost::beast::http;
    boost::beast::flat_buffer buf;
    for (;;) {
      Request req;
      boost::system::error_code ec;
      http::read(s, buf, req, ec);
      if (ec) return;
      const std::string target(req.target());
      if (req.method() == http::verb::get && (target == "/health" || target == "/load")) {
        const std::string body = target == "/health" ? R"({"status":"ok"})"
                                                     : R"({"running":0,"waiting":0,"kv_used_blocks":0,)"
                                                       R"("kv_total_blocks":64,"kv_utilization":0,"draining":false})";
        if (!write(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body))
          return;
        continue;
      }
      ++requests_;
      if (!handler_(s, req)) return;
    }
  }

  Handler handler_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::vector<std::shared_ptr<Socket>> sockets_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
};

}  // namespace nexus::test
