#include "gateway/proxy_session.h"

#include <fmt/format.h>

#include <limits>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>

#include "gateway/proxy_http.h"
#include "server/request_framing.h"
#include "server/routes.h"
#include "server/sse.h"
#include "util/json_depth.h"

namespace nexus::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

namespace {

std::string_view path_of(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

}  // namespace

ProxySession::ProxySession(Socket client, GatewayContext& ctx, net::ssl::context* tls)
    : ctx_(ctx),
      client_(std::move(client), tls),
      client_timer_(client_.get_executor()),
      deadline_(client_.get_executor()),
      backoff_(client_.get_executor()),
      tunnel_watch_(client_.get_executor()),
      rng_(ctx.session_seed.fetch_add(1) * 0x9e3779b97f4a7c15ull),
      tried_(ReplicaSet::kCapacity) {}

ProxySession::~ProxySession() {
  {
    std::lock_guard lock(ctx_.sessions_mu);
    ctx_.sessions.erase(this);
  }
  // The io_context went away with a request in flight (gateway stopped).
  if (attempt_open_ && replica_) replica_->load.end_request();
  if (proxying_) {
    ctx_.in_flight.fetch_sub(1);
    ctx_.metrics.in_flight().add(-1);
  }
  release_tenant();
}

void ProxySession::start() {
  {
    std::lock_guard lock(ctx_.sessions_mu);
    ctx_.sessions.emplace(this, weak_from_this());
  }
  boost::system::error_code ignored;
  client_.tcp().set_option(net::ip::tcp::no_delay(true), ignored);
  if (client_.tls()) return handshake();
  read_request();
}

void ProxySession::handshake() {
  client_timer_.expires_after(ctx_.opts.client_idle_timeout);
  client_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->close_client();
  });
  client_.async_handshake([self = shared_from_this()](boost::system::error_code ec) {
    self->client_timer_.cancel();
    if (ec || self->stopping_) {
      if (ec && self->ctx_.opts.log) self->ctx_.opts.log("TLS handshake failed: " + ec.message());
      return self->close_client();
    }
    self->read_request();
  });
}

void ProxySession::close_client() {
  client_timer_.cancel();
  disarm_deadline();
  client_.close();
}

void ProxySession::read_request() {
  cors_head_.clear();  // (errors before the request is parsed carry none)
  req_parser_.emplace();
  req_parser_->body_limit(ctx_.opts.body_limit);
  req_parser_->header_limit(64 * 1024);
  client_timer_.expires_after(ctx_.opts.client_idle_timeout);
  client_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->close_client();
  });
  http::async_read_header(client_, client_buf_, *req_parser_,
                          [self = shared_from_this()](boost::system::error_code ec, size_t) { self->on_header(ec); });
}

void ProxySession::on_header(boost::system::error_code ec) {
  if (ec) return on_request(ec);
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->client_, self->client_buf_, *self->req_parser_,
                     [self](boost::system::error_code ec, size_t) { self->on_request(ec); });
  };
  // A client that waits for "100 Continue" before its body (curl does above
  // 1 KiB) would otherwise stall a second.
  if (beast::iequals(req_parser_->get()[http::field::expect], "100-continue")) {
    out_ = "HTTP/1.1 100 Continue\r\n\r\n";
    writing_ = true;
    return net::async_write(client_, net::buffer(out_), [self = shared_from_this(), read_body](boost::system::error_code ec, size_t) {
      self->writing_ = false;
      if (ec || self->stopping_) return self->close_client();
      read_body();
    });
  }
  read_body();
}

void ProxySession::on_request(boost::system::error_code ec) {
  client_timer_.cancel();
  if (ec) {
    // Answered (413, 431, 400) without handle_request(): the log line's
    // method, path and time come from here (the header, when it was read
    // whole).
    received_ = Clock::now();
    replica_ = nullptr;
    attempts_ = 0;
    outcome_.reset();
    req_ = {};
    if (ec == http::error::body_limit) {
      req_.method(req_parser_->get().method());
      req_.target(req_parser_->get().target());
    }
  }
  if (ec == http::error::body_limit) {
    keep_alive_ = false;
    return respond(413, api_error_body(413, fmt::format("The request body exceeds {} bytes.", ctx_.opts.body_limit),
                                       "request_too_large", "invalid_request_error"));
  }
  if (ec == http::error::header_limit) {
    keep_alive_ = false;
    return respond(431, api_error_body(431, "The request headers are too large.", "headers_too_large",
                                       "invalid_request_error"));
  }
  if (ec) {
    const bool benign = ec == http::error::end_of_stream || ec == net::error::eof ||
                        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
                        ec == net::ssl::error::stream_truncated;  // a TLS client gone without close_notify
    if (benign || client_buf_.size() == 0) return close_client();
    keep_alive_ = false;
    return respond(400, api_error_body(400, "Malformed HTTP request: " + ec.message(), "bad_http_request",
                                       "invalid_request_error"));
  }
  req_ = req_parser_->release();
  handle_request();
}

void ProxySession::handle_request() {
  body_json_.reset();  // (a request answered early left the last one's)
  replica_ = nullptr;  // (of the previous request on this connection)
  // Absolute-form (`POST http://host:port/v1/completions`: RFC 9112 section
  // 3.2.2, a server MUST accept it): routed, and relayed, by its path.
  if (auto path = server::origin_form(std::string_view(req_.target().data(), req_.target().size())))
    req_.target(*path);
  keep_alive_ = req_.keep_alive();
  chunked_ = req_.version() >= 11;
  if (!chunked_) keep_alive_ = false;  // an HTTP/1.0 stream ends with the connection
  received_ = Clock::now();
  outcome_.reset();
  attempts_ = 0;
  deaths_ = 0;
  fingerprint_.reset();
  release_tenant();  // (the previous request's, as admit_request does: the log names this one's)
  tenant_.reset();
  const std::string_view path = path_of(std::string_view(req_.target().data(), req_.target().size()));
  const bool get = req_.method() == http::verb::get;
  if (answer_cors()) return;
  if (ctx_.draining.load()) {
    keep_alive_ = false;
    return respond(503, api_error_body(503, "The gateway is shutting down; retry shortly.", "server_shutting_down"),
                   "application/json", "Retry-After: 1\r\n");
  }
  if (path == "/health" && get) {
    int available = 0;
    for (auto& r : ctx_.replicas) available += r->available(received_);
    if (available == 0)
      return respond(503, api_error_body(503, "No replica is available.", "no_replica_available"));
    return respond(200, json{{"status", "ok"}, {"replicas_available", available}}.dump());
  }
  if (path == "/metrics" && get)
    return respond(200, ctx_.metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  // The gateway reads JSON bodies only under the process's nesting limit
  // (util/json_depth.h): here to add include_usage to a stream under
  // --api-keys, below to hash the prefix. A body past it is the client's
  // 400, as the replica would answer it.
  auto too_deep = [this](const JsonTooDeep& e) {
    release_tenant();
    respond(400, server::error_body(server::nesting_too_deep(e.limit)));
  };
  try {
    if (ctx_.limiter && !admit_request()) return;
  } catch (const JsonTooDeep& e) {
    return too_deep(e);
  }
  // A WebSocket upgrade: relayed to one replica for the session's life
  // (moved to another one if it dies).
  if (get && beast::iequals(req_[http::field::upgrade], "websocket")) {
    if (const server::Route* route = server::find_route(path); route && route->websocket) {
      usage_tap_.reset();
      return start_ws_relay(route->id == server::RouteId::Realtime ? WsProtocol::Realtime : WsProtocol::Responses);
    }
  }
  // Everything else goes to a replica, which validates it. The body is read
  // only for routing: a prefix to hash (a body that is not JSON is relayed
  // as it is, and the replica answers 400).
  prefix_.clear();
  if (ctx_.router.policy() == PolicyKind::Prefix && !req_.body().empty()) {
    try {
      prefix_ = prefix_block_hashes(prefix_text(body_json()));
    } catch (const JsonTooDeep& e) {
      return too_deep(e);
    }
  }
  body_json_.reset();  // read by all that needed it: not kept for the request's life
  if (refuse_query_of_death()) return;
  proxying_ = true;
  ctx_.in_flight.fetch_add(1);
  ctx_.metrics.in_flight().add(1);
  ctx_.budget.record_request(received_);
  std::fill(tried_.begin(), tried_.end(), false);
  last_answer_.reset();
  last_error_.clear();
  last_timed_out_ = false;
  started_ = false;
  start_attempt();
}

void ProxySession::respond(int status, const std::string& body, const std::string& content_type,
                           const std::string& extra_headers) {
  out_ = fmt::format("HTTP/1.1 {} {}\r\n", status, std::string(http::obsolete_reason(static_cast<http::status>(status))));
  // A 204 has neither Content-Type nor Content-Length (RFC 9110 section 8.6).
  if (status != 204) out_ += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", content_type, body.size());
  out_ += extra_headers + cors_head_ + fmt::format("Connection: {}\r\n\r\n", keep_alive_ ? "keep-alive" : "close");
  if (req_.method() != http::verb::head) out_ += body;
  log_request(status);
  write_client(true);
}

nlohmann::ordered_json& ProxySession::body_json() {
  if (!body_json_) {
    try {
      body_json_ = parse_json_bounded<nlohmann::ordered_json>(req_.body());
    } catch (const nlohmann::json::exception&) {
      body_json_ = nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
    }
  }
  return *body_json_;
}

bool ProxySession::answer_cors() {
  cors_head_.clear();
  if (!ctx_.cors.enabled()) return false;
  const auto origin_field = req_[http::field::origin];
  const std::string_view origin(origin_field.data(), origin_field.size());
  for (const auto& [k, v] : ctx_.cors.response_headers(origin)) cors_head_ += k + ": " + v + "\r\n";
  const auto asked = req_[http::field::access_control_request_method];
  if (req_.method() != http::verb::options || origin.empty() || asked.empty()) return false;
  // A preflight: the gateway's routes take GET and POST (the replicas check
  // the rest when the real request comes).
  if (!ctx_.cors.allow_origin(origin)) {
    respond(403, api_error_body(403, "The origin '" + std::string(origin) + "' is not allowed (--cors-allow-origin).",
                                "cors_origin_not_allowed", "invalid_request_error"));
    return true;
  }
  const auto headers = req_[http::field::access_control_request_headers];
  std::string head;  // added to cors_head_ (the Allow-Origin and Vary every response carries)
  for (const auto& [k, v] :
       ctx_.cors.preflight_headers(origin, "GET, HEAD, POST", std::string_view(headers.data(), headers.size())))
    head += k + ": " + v + "\r\n";
  respond(204, "", "", head);  // (with cors_head_: Allow-Origin and Vary, once each)
  return true;
}

void ProxySession::log_request(int status, std::string_view note) {
  if (!ctx_.opts.log) return;
  std::string line = fmt::format(
      "method={} path={} status={} replica={} ms={:.1f} attempts={} outcome={}", std::string(req_.method_string()),
      logfmt_value(std::string(req_.target())), status, replica_ ? replica_->id : "-",
      std::chrono::duration<double, std::milli>(Clock::now() - received_).count(), attempts_,
      outcome_ ? outcome_name(*outcome_) : "-");
  if (tenant_ && ctx_.limiter) line += " tenant=" + logfmt_value(ctx_.limiter->tenants()[*tenant_].name);
  if (!note.empty()) line += " " + std::string(note);
  ctx_.opts.log(line);
}

void ProxySession::write_client(bool then_next_request) {
  writing_ = true;
  net::async_write(client_, net::buffer(out_),
                   [self = shared_from_this(), then_next_request](boost::system::error_code ec, size_t) {
                     self->writing_ = false;
                     if (self->stopping_) return self->close_client();
                     if (ec || !then_next_request) {
                       if (ec) self->close_client();
                       return;
                     }
                     if (self->keep_alive_) return self->read_request();
                     self->close_client();
                   });
}

void ProxySession::shutdown() {
  net::post(client_.get_executor(), [self = shared_from_this()] { self->end_for_shutdown(); });
}

void ProxySession::end_for_shutdown() {
  stopping_ = true;
  if (tunnel_) return end_tunnel();
  if (writing_) return;  // its completion closes the connection
  if (upstream_pending_) {
    // Its handler comes back here once the operation is cancelled.
    boost::system::error_code ignored;
    if (up_) up_->close(ignored);
    return;
  }
  keep_alive_ = false;
  backoff_.cancel();
  if (!proxying_) return close_client();
  end_attempt(AttemptEnd::Healthy, false);
  finish(Outcome::UpstreamError);
  const std::string message = "The gateway stopped before this request finished; retry it.";
  if (!started_)
    return respond(503, api_error_body(503, message, "server_shutting_down"), "application/json", "Retry-After: 1\r\n");
  const std::string payload = (blank_line_last_ ? "" : "\n\n") +
                              server::sse_event(api_error_body(503, message, "server_shutting_down")) +
                              std::string(server::kSseDone);
  out_ = chunked_ ? fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", payload.size(), payload) : payload;
  write_client(false);
}

}  // namespace nexus::gateway
