#include "loadgen/http_transport.h"

#include <limits>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "loadgen/deadline.h"
#include "loadgen/api_wire.h"
#include "loadgen/sse_parser.h"

namespace nexus::loadgen {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

constexpr size_t kMaxErrorBody = 64 * 1024;  // of a non-2xx body kept for the message

// The message of an OpenAI-style error body, else the body itself (shortened).
std::string error_text(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"];
    if (e.is_string()) return e;
  }
  return body.size() > 200 ? body.substr(0, 200) + "..." : body;
}

bool broken_connection(const beast::error_code& ec) {
  return ec == net::error::eof || ec == http::error::end_of_stream || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::connection_aborted ||
         ec == net::ssl::error::stream_truncated;  // a TLS server that closed without close_notify
}

}  // namespace

struct HttpTransport::Impl {
  HttpTransportOptions opts;
  net::io_context ioc;
  tcp::resolver resolver{ioc};
  std::optional<ClientConnection> conn;  // made once opts is set
  beast::flat_buffer buf;
  bool connected = false;
  uint64_t opened = 0;

  // One async operation, bounded by `deadline` (loadgen/deadline.h).
  template <class Start>
  beast::error_code run(Clock::time_point deadline, Start&& start) {
    return run_until_deadline(ioc, deadline, std::forward<Start>(start), [&] {
      resolver.cancel();
      close();
    });
  }

  void close() {
    conn->close();
    conn->reset();  // (fresh TLS state for the next connection)
    buf.consume(buf.size());
    connected = false;
  }

  beast::error_code connect(Clock::time_point deadline) {
    tcp::resolver::results_type endpoints;
    beast::error_code ec = run(deadline, [&](auto h) {
      resolver.async_resolve(opts.server.host, opts.server.port,
                             [h, &endpoints](beast::error_code e, tcp::resolver::results_type r) mutable {
                               endpoints = std::move(r);
                               h(e);
                             });
    });
    if (ec) return ec;
    ec = run(deadline, [&](auto h) { net::async_connect(conn->tcp(), endpoints, h); });
    if (!ec && conn->tls()) {
      if (!conn->set_server_name(opts.server.host)) ec = net::error::invalid_argument;
      if (!ec) ec = run(deadline, [&](auto h) { conn->async_handshake(h); });
    }
    if (ec) {
      close();
      return ec;
    }
    beast::error_code ignored;
    conn->tcp().set_option(tcp::no_delay(true), ignored);  // small requests go out at once
    connected = true;
    ++opened;
    return {};
  }

  http::request<http::string_body> make_request(http::verb verb, const std::string& target, std::string body) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, opts.server.host + ":" + opts.server.port);
    req.set(http::field::user_agent, "nexus-bench");
    if (!opts.api_key.empty()) req.set(http::field::authorization, "Bearer " + opts.api_key);
    if (!opts.keep_alive) req.set(http::field::connection, "close");
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.set(http::field::accept, "text/event-stream");
      req.body() = std::move(body);
    }
    req.prepare_payload();
    return req;
  }

  // Connects when needed, writes `req` and reads the response header into
  // `parser`. A reused connection that fails before any response byte is
  // reopened once (the server may have closed it while idle).
  template <class Parser>
  beast::error_code send(const http::request<http::string_body>& req, std::optional<Parser>& parser,
                         std::uint64_t body_limit, Clock::time_point deadline, RequestResult& r,
                         bool& connect_failed) {
    for (int attempt = 0;; ++attempt) {
      parser.emplace();  // fresh for each attempt
      parser->body_limit(body_limit);
      const bool reused = connected;
      if (!connected) {
        const auto t0 = Clock::now();
        if (beast::error_code ec = connect(deadline)) {
          connect_failed = true;
          return ec;
        }
        r.connect_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
      r.reused_connection = reused;
      beast::error_code ec = run(deadline, [&](auto h) { http::async_write(*conn, req, h); });
      if (!ec) ec = run(deadline, [&](auto h) { http::async_read_header(*conn, buf, *parser, h); });
      if (!ec) return {};
      close();
      if (!(reused && attempt == 0 && broken_connection(ec))) return ec;
    }
  }
};

HttpTransport::HttpTransport(HttpTransportOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->conn.emplace(impl_->ioc, impl_->opts.tls);
}

HttpTransport::~HttpTransport() { impl_->close(); }

uint64_t HttpTransport::connections_opened() const { return impl_->opened; }

RequestResult HttpTransport::run_request(const RequestSpec& spec) {
  Impl& m = *impl_;
  RequestResult r;
  r.start = Clock::now();
  const Clock::time_point deadline = r.start + m.opts.timeout;
  const auto req = m.make_request(http::verb::post, request_target(m.opts.server, spec.api),
                                  request_body(spec, m.opts.extra_body).dump());
  auto fail = [&](ErrorKind kind, const std::string& msg) {
    m.close();
    r.end = Clock::now();
    r.error = kind;
    r.error_message = msg;
    return r;
  };

  std::optional<http::response_parser<http::buffer_body>> parser_slot;
  bool connect_failed = false;
  if (beast::error_code ec = m.send(req, parser_slot, std::uint64_t{1} << 40, deadline, r,
                                    connect_failed)) {
    if (ec == beast::error::timeout) return fail(ErrorKind::Timeout, "timed out before the response header");
    const std::string where = connect_failed ? "connect to " + m.opts.server.to_string() : "send request";
    return fail(connect_failed ? ErrorKind::Connect : ErrorKind::Connection, where + ": " + ec.message());
  }
  auto& parser = *parser_slot;
  r.http_status = static_cast<int>(parser.get().result_int());
  const bool ok_status = r.http_status >= 200 && r.http_status < 300;

  SseParser sse;
  std::vector<SseEvent> events;
  std::string error_body;
  bool saw_done = false;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    beast::error_code ec = m.run(deadline, [&](auto h) { http::async_read_some(*m.conn, m.buf, parser, h); });
    if (ec == http::error::need_buffer) ec = {};
    const auto now = Clock::now();  // arrival time of what this read delivered
    if (ec == beast::error::timeout) return fail(ErrorKind::Timeout, "timed out while streaming the response");
    if (ec) return fail(ErrorKind::Connection, "reading the response: " + ec.message());
    const std::string_view got(chunk, sizeof chunk - parser.get().body().size);
    if (!ok_status) {
      if (error_body.size() < kMaxErrorBody) error_body.append(got.substr(0, kMaxErrorBody - error_body.size()));
      continue;
    }
    events.clear();
    sse.feed(got, events);
    for (const SseEvent& ev : events) {
      const ChunkInfo c = interpret_event(spec.api, ev.data);
      if (c.done) saw_done = true;
      if (c.malformed && r.ok()) {
        r.error = ErrorKind::Protocol;
        r.error_message = "malformed stream chunk: " + ev.data.substr(0, 200);
      }
      if (c.error && r.ok()) {
        r.error = ErrorKind::Server;
        r.error_message = *c.error;
      }
      if (!c.text.empty()) {
        r.token_times.push_back(now);
        r.text += c.text;
      }
      if (c.prompt_tokens) r.prompt_tokens = c.prompt_tokens;
      if (c.completion_tokens) r.completion_tokens = c.completion_tokens;
      if (c.cached_tokens) r.cached_tokens = c.cached_tokens;
    }
  }
  r.end = Clock::now();
  if (!parser.keep_alive() || !m.opts.keep_alive) m.close();
  if (!ok_status) {
    r.error = ErrorKind::HttpStatus;
    r.error_message = error_text(error_body);
  } else if (r.ok() && !saw_done) {
    r.error = ErrorKind::Protocol;
    r.error_message = "the response ended before its last event (content-type: " +
                      std::string(parser.get()[http::field::content_type]) + ")";
  }
  return r;
}

HttpReply HttpTransport::get(const std::string& target) {
  Impl& m = *impl_;
  HttpReply out;
  RequestResult r;
  const Clock::time_point deadline = Clock::now() + m.opts.timeout;
  const auto req = m.make_request(http::verb::get, m.opts.server.base_path + target, {});
  std::optional<http::response_parser<http::string_body>> parser;
  bool connect_failed = false;
  beast::error_code ec = m.send(req, parser, std::uint64_t{1} << 26, deadline, r, connect_failed);
  if (!ec) ec = m.run(deadline, [&](auto h) { http::async_read(*m.conn, m.buf, *parser, h); });
  if (ec) {
    m.close();
    out.error = ec == beast::error::timeout ? ErrorKind::Timeout
                : connect_failed            ? ErrorKind::Connect
                                            : ErrorKind::Connection;
    out.error_message = (connect_failed ? "cannot connect to " + m.opts.server.to_string() : "GET " + target) +
                        ": " + ec.message();
    return out;
  }
  out.status = static_cast<int>(parser->get().result_int());
  out.body = parser->get().body();
  if (!parser->keep_alive() || !m.opts.keep_alive) m.close();
  if (out.status < 200 || out.status >= 300) {
    out.error = ErrorKind::HttpStatus;
    out.error_message = error_text(out.body);
  }
  return out;
}

TransportFactory http_transport_factory(HttpTransportOptions opts) {
  return [opts] { return std::make_unique<HttpTransport>(opts); };
}

}  // namespace nexus::loadgen
