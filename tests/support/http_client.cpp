#include "support/http_client.h"

#include <stdexcept>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace nexus::test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct HttpClient::Impl {
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buf;
  std::optional<http::response_parser<http::string_body>> parser;
  size_t consumed = 0;  // body bytes handed out by next_event()
  std::chrono::milliseconds timeout;

  // Runs one async operation to completion or throws after `timeout`.
  template <class Start>
  size_t run(Start&& start, const char* what, bool throw_on_error = true, beast::error_code* out_ec = nullptr) {
    bool done = false;
    beast::error_code err;
    size_t n = 0;
    start([&](beast::error_code ec, size_t bytes) {
      done = true;
      err = ec;
      n = bytes;
    });
    ioc.restart();
    ioc.run_for(timeout);
    if (!done) {
      beast::error_code ignored;
      socket.close(ignored);
      ioc.restart();
      ioc.run();
      throw std::runtime_error(std::string(what) + ": timed out");
    }
    if (out_ec) *out_ec = err;
    if (err && throw_on_error) throw std::runtime_error(std::string(what) + ": " + err.message());
    return n;
  }

  HttpResponse header_of(const http::response<http::string_body>& res) {
    HttpResponse r;
    r.status = static_cast<int>(res.result_int());
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(f.value());
    }
    r.keep_alive = res.keep_alive();
    return r;
  }
};

HttpClient::HttpClient(const std::string& host, uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
  const tcp::endpoint ep(net::ip::make_address(host), port);
  impl_->run([&](auto h) { impl_->socket.async_connect(ep, [h](beast::error_code ec) { h(ec, 0); }); }, "connect");
  impl_->socket.set_option(tcp::no_delay(true));
}

HttpClient::~HttpClient() { close(); }

void HttpClient::send(const std::string& method, const std::string& target, const std::string& body,
                      const Headers& headers) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  if (req.method() == http::verb::unknown) req.method_string(method);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST") {
    if (req[http::field::content_type].empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  beast::error_code ec;
  impl_->run([&](auto h) { http::async_write(impl_->socket, req, h); }, "write request", false, &ec);
  // A server may answer and stop reading before the body is sent (413):
  // that is not our failure; the response is read next.
  impl_->parser.emplace();
  // Not boost::none: Beast 1.74 then rejects every Content-Length body.
  impl_->parser->body_limit(std::uint64_t{1} << 30);
  // A response to HEAD has the headers of GET's and no body (RFC 9110 9.3.2).
  impl_->parser->skip(req.method() == http::verb::head);
  impl_->consumed = 0;
}

HttpResponse HttpClient::read_header() {
  impl_->run([&](auto h) { http::async_read_header(impl_->socket, impl_->buf, *impl_->parser, h); }, "read header");
  return impl_->header_of(impl_->parser->get());
}

std::optional<std::string> HttpClient::next_event() {
  for (;;) {
    std::string& body = impl_->parser->get().body();
    const size_t end = body.find("\n\n", impl_->consumed);
    if (end != std::string::npos) {
      std::string ev = body.substr(impl_->consumed, end - impl_->consumed);
      impl_->consumed = end + 2;
      return ev;
    }
    if (impl_->parser->is_done()) {
      if (impl_->consumed >= body.size()) return std::nullopt;
      std::string rest = body.substr(impl_->consumed);
      impl_->consumed = body.size();
      return rest;
    }
    impl_->run([&](auto h) { http::async_read_some(impl_->socket, impl_->buf, *impl_->parser, h); }, "read body");
  }
}

HttpResponse HttpClient::finish() {
  if (!impl_->parser->is_done()) {
    impl_->run([&](auto h) { http::async_read(impl_->socket, impl_->buf, *impl_->parser, h); }, "read body");
  }
  HttpResponse r = impl_->header_of(impl_->parser->get());
  r.body = impl_->parser->get().body();
  return r;
}

HttpResponse HttpClient::request(const std::string& method, const std::string& target, const std::string& body,
                                 const Headers& headers) {
  send(method, target, body, headers);
  read_header();
  return finish();
}

void HttpClient::write_raw(const std::string& bytes) {
  impl_->run([&](auto h) { net::async_write(impl_->socket, net::buffer(bytes), h); }, "write");
}

std::string HttpClient::read_raw_some() {
  if (impl_->buf.size() > 0) {
    std::string s = beast::buffers_to_string(impl_->buf.data());
    impl_->buf.consume(impl_->buf.size());
    return s;
  }
  char data[65536];
  beast::error_code ec;
  const size_t n = impl_->run([&](auto h) { impl_->socket.async_read_some(net::buffer(data), h); }, "read", false, &ec);
  if (ec && ec != net::error::eof && ec != net::error::connection_reset) {
    throw std::runtime_error("read: " + ec.message());
  }
  return std::string(data, n);
}

bool HttpClient::wait_closed_by_peer() {
  try {
    for (;;) {
      char data[4096];
      beast::error_code ec;
      impl_->run([&](auto h) { impl_->socket.async_read_some(net::buffer(data), h); }, "read", false, &ec);
      if (ec) return true;
    }
  } catch (const std::runtime_error&) {
    return false;  // timed out: still open
  }
}

uint16_t HttpClient::local_port() const { return impl_->socket.local_endpoint().port(); }

void HttpClient::close() {
  beast::error_code ec;
  impl_->socket.shutdown(tcp::socket::shutdown_both, ec);
  impl_->socket.close(ec);
}

std::optional<std::vector<std::string>> split_sse(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) return std::nullopt;  // trailing bytes
    std::string ev = body.substr(pos, end - pos);
    if (ev.rfind("data: ", 0) != 0 || ev.find('\n') != std::string::npos) return std::nullopt;
    events.push_back(ev.substr(6));
    pos = end + 2;
  }
  return events;
}

}  // namespace nexus::test
