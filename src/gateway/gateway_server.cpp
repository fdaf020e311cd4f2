#include "gateway/gateway_server.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/ssl/context.hpp>

#include "gateway/dns_discovery.h"
#include "gateway/gateway_context.h"
#include "gateway/proxy_session.h"
#include "loadgen/url.h"
#include "util/error.h"

namespace nexus::gateway {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::vector<loadgen::ServerUrl> parse_replicas(const std::vector<std::string>& urls, bool discovery) {
  if (urls.empty() && !discovery) throw Error("the gateway needs at least one --replica URL or --replicas-from source");
  std::vector<loadgen::ServerUrl> out;
  for (const std::string& u : urls) {
    out.push_back(loadgen::parse_server_url(u));
    if (out.back().tls) throw Error("replica " + u + ": the gateway reaches replicas over plain http:// only");
    for (size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i].to_string() == out.back().to_string()) throw Error("replica " + u + " is listed twice");
  }
  return out;
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
      : ctx(std::move(o)),
        tls(tls_context(ctx.opts.tls_cert, ctx.opts.tls_key)),
        ioc(std::make_unique<net::io_context>(ctx.opts.io_threads)), acceptor(net::make_strand(*ioc)) {
    for (const loadgen::ServerUrl& u : urls) {
      const Replica& r = add_replica(u);
      if (const std::string why = r.pool.resolve_error(); !why.empty())
        std::fprintf(stderr, "nexus gateway: replica %s does not resolve yet (%s); its health checks retry\n",
                     r.id.c_str(), why.c_str());
    }
    for (const std::string& spec : ctx.opts.replicas_from) sources.push_back(Source{parse_dns_source(spec), {}, nullptr});
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

  // Appends a replica (its metrics first: a reader that sees the replica
  // sees its series), with its health checks once the gateway runs.
  Replica& add_replica(const loadgen::ServerUrl& u) {
    const size_t i = ctx.replicas.size();
    if (ctx.replicas.full()) throw Error("replica " + u.to_string() + ": the gateway's replica list is full");
    GatewayMetrics& m = ctx.metrics;
    auto r = std::make_unique<Replica>(i, u, ioc->get_executor(), ctx.opts.breaker,
                                       [&m, i](BreakerState, BreakerState to) { m.on_breaker_transition(i, to); });
    m.add_replica(i, r->id);
    Replica& added = ctx.replicas.add(std::move(r));
    if (started) start_checks(added);
    return added;
  }

  void start_checks(Replica& r) {
    auto c = std::make_shared<HealthChecker>(net::make_strand(*ioc), r, ctx.metrics, ctx.opts.health);
    c->start();
    checkers.push_back(std::move(c));
  }

  // One DNS answer of `src` (on its discovery strand; sources' strands are
  // serialized by discovery_mu, as they share the replica list).
  void on_dns_answer(size_t src, const std::vector<std::string>& answer) {
    std::lock_guard lock(discovery_mu);
    Source& s = sources[src];
    std::vector<std::pair<std::string, bool>> known;
    for (size_t i : s.replicas) known.emplace_back(ctx.replicas[i]->url.to_string(), ctx.replicas[i]->listed.load());
    std::vector<std::string> others;
    for (const auto& r : ctx.replicas)
      if (std::find(s.replicas.begin(), s.replicas.end(), r->index) == s.replicas.end()) others.push_back(r->url.to_string());
    const DnsChanges c = reconcile(known, others, answer);
    for (size_t k : c.unlisted) {
      Replica& r = *ctx.replicas[s.replicas[k]];
      r.listed.store(false);
      std::fprintf(stderr, "nexus gateway: %s: %s left the answer (unlisted)\n", s.source.spec.c_str(), r.id.c_str());
    }
    for (size_t k : c.relisted) {
      Replica& r = *ctx.replicas[s.replicas[k]];
      r.listed.store(true);
      std::fprintf(stderr, "nexus gateway: %s: %s is back (listed)\n", s.source.spec.c_str(), r.id.c_str());
    }
    for (const std::string& url : c.added) {
      try {
        const Replica& r = add_replica(loadgen::parse_server_url(url));
        s.replicas.push_back(r.index);
        std::fprintf(stderr, "nexus gateway: %s: added replica %s\n", s.source.spec.c_str(), r.id.c_str());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "nexus gateway: %s: %s not added: %s\n", s.source.spec.c_str(), url.c_str(), e.what());
      }
    }
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
  std::vector<std::shared_ptr<HealthChecker>> checkers;  // guarded by discovery_mu once started
  struct Source {
    DnsSource source;
    std::vector<size_t> replicas;  // indices of the replicas it added
    std::shared_ptr<DnsDiscovery> discovery;
  };
  std::vector<Source> sources;
  std::mutex discovery_mu;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  bool started = false, stopped = false;
};

GatewayServer::GatewayServer(GatewayOptions opts) {
  const auto urls = parse_replicas(opts.replicas, !opts.replicas_from.empty());
  impl_ = std::make_unique<Impl>(std::move(opts), urls);
}

GatewayServer::~GatewayServer() { stop(); }

void GatewayServer::start() {
  Impl& m = *impl_;
  if (m.started) return;
  m.started = true;
  {
    std::lock_guard lock(m.discovery_mu);
    for (auto& r : m.ctx.replicas) m.start_checks(*r);
    for (size_t i = 0; i < m.sources.size(); ++i) {
      m.sources[i].discovery = std::make_shared<DnsDiscovery>(
          net::make_strand(*m.ioc), m.sources[i].source, m.ctx.opts.dns_interval,
          [&m, i](const std::vector<std::string>& answer) { m.on_dns_answer(i, answer); });
      m.sources[i].discovery->start();
    }
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
    for (auto& src : m.sources)
      if (src.discovery) src.discovery->stop();
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
  for (auto& src : m.sources) src.discovery.reset();
  boost::system::error_code ignored;
  m.acceptor.close(ignored);
}

uint16_t GatewayServer::port() const { return impl_->port; }

const std::string& GatewayServer::host() const { return impl_->ctx.opts.host; }

bool GatewayServer::tls() const { return impl_->tls != nullptr; }

}  // namespace nexus::gateway
