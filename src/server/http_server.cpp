#include "server/http_server.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>

#include "server/http_session.h"
#include "server/realtime_session.h"
#include "server/stats_stream.h"
#include "util/error.h"

namespace nexus::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Refused connections still writing their 503 at once; beyond this, one is
// closed at accept without a reply (each holds a descriptor for up to the
// linger time).
constexpr int32_t kMaxRefusing = 64;

// max_connections 0: RLIMIT_NOFILE's soft limit less what the process needs
// besides connections (model file, pipes, the listener, logs).
int resolve_max_connections(int requested) {
  if (requested > 0) return requested;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 1024;
  return static_cast<int>(std::clamp<rlim_t>(lim.rlim_cur, 80, 1 << 20) - 64);
}

HttpServerOptions resolved(HttpServerOptions o) {
  o.max_connections = resolve_max_connections(o.max_connections);
  return o;
}

}  // namespace

ServerContext::ServerContext(Backend& backend, HttpServerOptions o)
    : router(backend), opts(resolved(std::move(o))), cors(opts.cors_allow_origins), tokenizer(opts.tokenizer_threads),
      stats(make_stats_hub(backend)) {
  router.set_server_metrics([this] { return server_metrics_text(); });
  router.set_draining_flag(&draining);
  router.set_max_request_priority(opts.max_request_priority);
  router.set_responses_store_bytes(opts.responses_store_bytes);
  router.set_strict_tools(opts.strict_tools);
}

size_t ServerContext::open_connections() const {
  std::lock_guard lock(mu);
  const size_t n = sessions.size() + ws_sessions.size();
  // Refused connections (sending their 503) are bounded on their own.
  return n - std::min(n, static_cast<size_t>(std::max(0, refusing.load(std::memory_order_relaxed))));
}

struct HttpServer::Impl {
  Impl(Backend& backend, HttpServerOptions opts)
      : ctx(backend, std::move(opts)), acceptor(net::make_strand(ioc)) {}

  void close_acceptor() {
    boost::system::error_code ec;
    acceptor.close(ec);
  }

  void do_accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) return accept_failed(ec);
      accept_backoff = std::chrono::milliseconds(0);
      ctx.connections_accepted.fetch_add(1, std::memory_order_relaxed);
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // SSE chunks are small; send them now
      if (ctx.open_connections() >= static_cast<size_t>(ctx.opts.max_connections)) {
        refuse(std::move(socket));
      } else {
        std::make_shared<HttpSession>(std::move(socket), ctx)->start();
      }
      do_accept();
    });
  }

  // Over max_connections: 503 too_many_connections (Retry-After: 1), then
  // the connection closes; or, with kMaxRefusing refusals already under way,
  // closed at once.
  void refuse(tcp::socket socket) {
    ctx.connections_refused.fetch_add(1, std::memory_order_relaxed);
    if (ctx.refusing.load(std::memory_order_relaxed) >= kMaxRefusing) {
      boost::system::error_code ignored;
      socket.close(ignored);
      return;
    }
    HttpReply r = error_reply(ApiError(
        503, fmt::format("The server has {} connections open, its limit (--max-connections); retry shortly.",
                         ctx.opts.max_connections),
        "", "too_many_connections", "server_error"));
    r.headers.emplace_back("Retry-After", "1");
    std::make_shared<HttpSession>(std::move(socket), ctx)->refuse(std::move(r));
  }

  // accept() failed: out of descriptors (EMFILE, ENFILE), buffers (ENOBUFS)
  // or the like. The pending connection stays in the listen queue, so an
  // immediate retry fails the same way and spins a core; wait instead, 10 ms
  // doubling to 1 s while it keeps failing, and retry. Counted, and logged
  // when the wait starts or grows.
  void accept_failed(boost::system::error_code ec) {
    ctx.accept_errors.fetch_add(1, std::memory_order_relaxed);
    accept_backoff = std::clamp(accept_backoff * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
    if (ctx.opts.log && accept_backoff != last_logged_backoff)
      ctx.opts.log(fmt::format("accept failed: {}; retrying in {} ms", ec.message(), accept_backoff.count()));
    last_logged_backoff = accept_backoff;
    accept_timer.expires_after(accept_backoff);
    accept_timer.async_wait([this](boost::system::error_code wait_ec) {
      if (wait_ec || !acceptor.is_open()) return;
      do_accept();
    });
  }

  // Order matters: handlers still queued in ioc when it is destroyed may hold
  // the last reference to a session, whose destructor touches ctx.
  ServerContext ctx;
  net::io_context ioc;
  // Keeps the I/O threads in run() until stop(), even at moments when no
  // operation is pending (stop() still has handlers to post then).
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor;
  net::steady_timer accept_timer{acceptor.get_executor()};  // on the acceptor's strand
  std::chrono::milliseconds accept_backoff{0}, last_logged_backoff{0};
  std::vector<std::thread> threads;
  std::string host;
  uint16_t port = 0;
  bool started = false;
  bool stopped = false;
};

HttpServer::HttpServer(Backend& backend, HttpServerOptions opts)
    : impl_(std::make_unique<Impl>(backend, std::move(opts))) {
  Impl& s = *impl_;
  const HttpServerOptions& o = s.ctx.opts;
  boost::system::error_code ec;
  const auto addr = net::ip::make_address(o.host, ec);
  if (ec) throw Error(fmt::format("invalid listen address '{}': {}", o.host, ec.message()));
  const tcp::endpoint ep(addr, o.port);
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw Error(fmt::format("cannot listen on {}:{}: {}", o.host, o.port, ec.message()));
  s.host = o.host;
  s.port = s.acceptor.local_endpoint().port();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  Impl& s = *impl_;
  if (s.started) return;
  s.started = true;
  s.work.emplace(s.ioc.get_executor());
  net::post(s.acceptor.get_executor(), [&s] { s.do_accept(); });
  s.ctx.stats->start(net::make_strand(s.ioc));
  const int n = std::max(1, s.ctx.opts.io_threads);
  for (int i = 0; i < n; ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
}

void HttpServer::drain() { impl_->ctx.draining.store(true); }

int32_t HttpServer::in_flight() const { return impl_->ctx.http_in_flight.load(); }

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  if (!s.started) return s.close_acceptor();
  // Close the acceptor on its strand and wait: after that no new session
  // can appear, so the loop below reaches them all.
  std::promise<void> closed;
  net::post(s.acceptor.get_executor(), [&s, &closed] {
    s.close_acceptor();
    closed.set_value();
  });
  closed.get_future().wait();
  s.ctx.stats->stop();  // its timer and streams
  std::vector<std::shared_ptr<HttpSession>> live;
  std::vector<std::shared_ptr<WsSession>> live_realtime;
  {
    std::lock_guard lock(s.ctx.mu);
    for (auto& [ptr, weak] : s.ctx.sessions) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
    for (auto& [ptr, weak] : s.ctx.ws_sessions) {
      if (auto session = weak.lock()) live_realtime.push_back(std::move(session));
    }
  }
  // Outside the lock: dropping the last reference runs ~HttpSession (or
  // ~WsSession), which takes ctx.mu.
  for (auto& session : live) session->shutdown();
  for (auto& session : live_realtime) session->shutdown();
  live.clear();
  live_realtime.clear();
  {
    // Closing aborts every pending operation; the sessions then end on their
    // own. Do not wait forever for one that is somehow stuck.
    std::unique_lock lock(s.ctx.mu);
    s.ctx.cv.wait_for(lock, std::chrono::seconds(2),
                      [&s] { return s.ctx.sessions.empty() && s.ctx.ws_sessions.empty(); });
  }
  // From here on no engine thread posts into (or holds a part of) ioc.
  s.ctx.gate->close();
  // Nor a tokenizer worker (what they hold goes with them, while ioc lives).
  s.ctx.tokenizer.stop();
  s.work.reset();
  s.ioc.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
}

uint16_t HttpServer::port() const { return impl_->port; }
const std::string& HttpServer::host() const { return impl_->host; }
uint64_t HttpServer::connections_accepted() const { return impl_->ctx.connections_accepted.load(); }

std::shared_ptr<StatsHub> ServerContext::make_stats_hub(Backend& backend) {
  return std::make_shared<StatsHub>([&backend] { return backend.live_counters(); });
}

std::string ServerContext::server_metrics_text() const {
  return fmt::format(
      "# HELP nexus_http_connections_accepted_total TCP connections the HTTP server accepted.\n"
      "# TYPE nexus_http_connections_accepted_total counter\n"
      "nexus_http_connections_accepted_total {}\n"
      "# HELP nexus_http_accept_errors_total accept() calls that failed (out of descriptors, ...); each is "
      "followed by a wait of 10 ms doubling to 1 s.\n"
      "# TYPE nexus_http_accept_errors_total counter\n"
      "nexus_http_accept_errors_total {}\n"
      "# HELP nexus_http_connections_open HTTP and realtime connections open now.\n"
      "# TYPE nexus_http_connections_open gauge\n"
      "nexus_http_connections_open {}\n"
      "# HELP nexus_http_connections_refused_total Connections refused over --max-connections (503, or closed "
      "at accept).\n"
      "# TYPE nexus_http_connections_refused_total counter\n"
      "nexus_http_connections_refused_total {}\n"
      "# HELP nexus_realtime_sessions_cut_off_total Realtime sessions closed (1008, error input_flood) for "
      "sending more refused messages than 4 x the body limit.\n"
      "# TYPE nexus_realtime_sessions_cut_off_total counter\n"
      "nexus_realtime_sessions_cut_off_total {}\n",
      connections_accepted.load(std::memory_order_relaxed), accept_errors.load(std::memory_order_relaxed),
      open_connections(), connections_refused.load(std::memory_order_relaxed),
      realtime_cut_off.load(std::memory_order_relaxed));
}

uint64_t HttpServer::connections_refused() const { return impl_->ctx.connections_refused.load(); }
int HttpServer::max_connections() const { return impl_->ctx.opts.max_connections; }

uint64_t HttpServer::accept_errors() const { return impl_->ctx.accept_errors.load(); }
uint64_t HttpServer::requests_served() const { return impl_->ctx.requests_served.load(); }

}  // namespace nexus::server
