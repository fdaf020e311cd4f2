#include "gateway/gateway_server.h"

#include <cstdio>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/ssl/context.hpp>

#include "gateway/gateway_context.h"
#include "gateway/proxy_session.h"
#include "loadgen/url.h"
#include "util/error.h"

namespace nexus::gateway {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::vector<loadgen::ServerUrl> parse_replicas(const std::vector<std::string>& urls) {
  if (urls.empty()) throw Error("the gateway needs at least one --replica URL");
  std::vector<loadgen::ServerUrl> out;
  for (const std::string& u : urls) {
    out.push_back(loadgen::parse_server_url(u));
    if (out.back().tls) throw Error("replica " + u + ": the gateway reaches replicas over plain http:// only");
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i].to_string() == out.back().to_string()) throw Error("replica " + u + " is listed twice");
  }
  return out;
}

std::vector<std::string> ids_of(const std::vector<loadgen::ServerUrl>& urls) {
  std::vector<std::string> ids;
  for (const auto& u : urls) ids.push_back(u.host + ":" + u.port);
  return ids;
}

// The server's TLS context from PEM files (throws nexus::Error naming the
// file OpenSSL refused).
std::unique_ptr<net::ssl::context> tls_context(const std::string& cert, const std::string& key) {
  if (cert.empty() && key.empty()) return nullptr;
  if (cert.empty() || key.empty()) throw Error("TLS needs both --tls-cert and --tls-key");
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1 |
                   net::ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert, ec);
  if (ec) throw Error("--tls-cert " + cert + ": " + ec.message());
  ctx->use_private_key_file(key, net::ssl::context::pem, ec);
  if (ec) throw Error("--tls-key " + key + ": " + ec.message() + " (is it the key of --tls-cert " + cert + "?)");
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    throw Error("--tls-key " + key + ": not the key of --tls-cert " + cert + " (is it the key of that certificate?)");
  return ctx;
}

}  // namespace

struct GatewayServer::Impl {
  Impl(GatewayOptions o, const std::vector<loadgen::ServerUrl>& urls)
      : ctx(std::move(o), ids_of(urls)),
        tls(tls_context(ctx.opts.tls_cert, ctx.opts.tls_key)),
        ioc(std::make_unique<net::io_context>(ctx.opts.io_threads)), acceptor(net::make_strand(*ioc)) {
    for (size_t i = 0; i < urls.size(); ++i) {
      GatewayMetrics& m = ctx.metrics;
      ctx.replicas.push_back(std::make_unique<Replica>(
          i, urls[i], ioc->get_executor(), ctx.opts.breaker,
          [&m, i](BreakerState, BreakerState to) { m.on_breaker_transition(i, to); }));
      const Replica& r = *ctx.replicas.back();
      if (const std::string why = r.pool.resolve_error(); !why.empty())
        std::fprintf(stderr, "nexus gateway: replica %s does not resolve yet (%s); its health checks retry\n",
                     r.id.c_str(), why.c_str());
    }
    boost::system::error_code ec;
    const auto addr = net::ip::make_address(ctx.opts.host, ec);
    if (ec) throw Error("--listen: '" + ctx.opts.host + "' is not an IP address");
    const tcp::endpoint ep(addr, ctx.opts.port);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec) throw Error("cannot listen on " + ctx.opts.host + ":" + std::to_string(ctx.opts.port) + ": " + ec.message());
    port = acceptor.local_endpoint().port();
  }

  void accept() {
    acceptor.async_accept(net::make_strand(*ioc), [this](boost::system::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) std::make_shared<ProxySession>(std::move(s), ctx, tls.get())->start();
      if (ec) {  // out of descriptors, ...: wait before trying again instead of spinning
        accept_backoff.expires_after(std::chrono::milliseconds(50));
        accept_backoff.async_wait([this](boost::system::error_code e) {
          if (!e) accept();
        });
        return;
      }
      accept();
    });
  }

  GatewayContext ctx;
  std::unique_ptr<net::ssl::context> tls;  // null: plain HTTP
  std::unique_ptr<net::io_context> ioc;
  tcp::acceptor acceptor;  // on a strand: stop() closes it while accepts run
  net::steady_timer accept_backoff{acceptor.get_executor()};
  std::vector<std::shared_ptr<HealthChecker>> checkers;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  bool started = false, stopped = false;
};

GatewayServer::GatewayServer(GatewayOptions opts) {
  const auto urls = parse_replicas(opts.replicas);
  impl_ = std::make_unique<Impl>(std::move(opts), urls);
}

GatewayServer::~GatewayServer() { stop(); }

void GatewayServer::start() {
  Impl& m = *impl_;
  if (m.started) return;
  m.started = true;
  for (auto& r : m.ctx.replicas) {
    auto c = std::make_shared<HealthChecker>(net::make_strand(*m.ioc), *r, m.ctx.metrics, m.ctx.opts.health);
    c->start();
    m.checkers.push_back(std::move(c));
  }
  m.accept();
  for (int i = 0; i < m.ctx.opts.io_threads; ++i) m.threads.emplace_back([&m] { m.ioc->run(); });
}

void GatewayServer::drain() { impl_->ctx.draining.store(true); }

int32_t GatewayServer::in_flight() const { return impl_->ctx.in_flight.load(); }

void GatewayServer::stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  if (m.started) {
    // Requests still in flight end with an error event or a 503 instead of
    // a cut connection; then wait (bounded) for the sessions to close.
    std::vector<std::shared_ptr<ProxySession>> live;
    {
      std::lock_guard lock(m.ctx.sessions_mu);
      for (auto& [p, w] : m.ctx.sessions)
        if (auto s = w.lock()) live.push_back(std::move(s));
    }
    for (auto& s : live) s->shutdown();
    live.clear();
    net::post(m.acceptor.get_executor(), [&m] {
      boost::system::error_code ignored;
      m.acceptor.close(ignored);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (;;) {
      {
        std::lock_guard lock(m.ctx.sessions_mu);
        if (m.ctx.sessions.empty()) break;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  m.ioc->stop();
  for (auto& t : m.threads) t.join();
  m.threads.clear();
  // The idle pooled sockets go now; the io_context, destroyed before the
  // context (member order), then destroys the sessions and checkers its
  // pending handlers hold, while the replicas they name still exist.
  for (auto& r : m.ctx.replicas) r->pool.clear();
  m.checkers.clear();
  boost::system::error_code ignored;
  m.acceptor.close(ignored);
}

uint16_t GatewayServer::port() const { return impl_->port; }

const std::string& GatewayServer::host() const { return impl_->ctx.opts.host; }

bool GatewayServer::tls() const { return impl_->tls != nullptr; }

}  // namespace nexus::gateway
