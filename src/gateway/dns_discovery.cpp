#include "gateway/dns_discovery.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include "util/error.h"

namespace nexus::gateway {

namespace net = boost::asio;

DnsSource parse_dns_source(const std::string& spec) {
  const std::string usage = "--replicas-from " + spec + ": expected dns:NAME:PORT";
  if (spec.rfind("dns:", 0) != 0) throw Error(usage + " (only dns: sources exist)");
  const std::string rest = spec.substr(4);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) throw Error(usage);
  DnsSource s{rest.substr(0, colon), rest.substr(colon + 1), spec};
  const bool digits = !s.port.empty() && s.port.size() <= 5 &&
                      std::all_of(s.port.begin(), s.port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoi(s.port) < 1 || std::stoi(s.port) > 65535)
    throw Error(usage + " ('" + s.port + "' is not a port)");
  return s;
}

DnsChanges reconcile(const std::vector<std::pair<std::string, bool>>& known, const std::vector<std::string>& others,
                     const std::vector<std::string>& answer) {
  const std::set<std::string> now(answer.begin(), answer.end());
  DnsChanges c;
  std::set<std::string> seen;
  for (size_t i = 0; i < known.size(); ++i) {
    const bool in = now.count(known[i].first) > 0;
    if (in && !known[i].second) c.relisted.push_back(i);
    if (!in && known[i].second) c.unlisted.push_back(i);
    seen.insert(known[i].first);
  }
  seen.insert(others.begin(), others.end());
  for (const std::string& u : answer)
    if (seen.insert(u).second) c.added.push_back(u);
  return c;
}

std::string replica_url_of(const net::ip::address& a, const std::string& port) {
  return a.is_v6() ? "http://[" + a.to_string() + "]:" + port : "http://" + a.to_string() + ":" + port;
}

DnsDiscovery::DnsDiscovery(net::any_io_executor strand, DnsSource source, std::chrono::milliseconds interval,
                           OnAnswer on_answer)
    : strand_(strand),
      source_(std::move(source)),
      interval_(interval),
      on_answer_(std::move(on_answer)),
      resolver_(strand),
      timer_(strand) {}

void DnsDiscovery::start() {
  net::post(strand_, [self = shared_from_this()] { self->lookup(); });
}

void DnsDiscovery::stop() {
  net::post(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->resolver_.cancel();
    self->timer_.cancel();
  });
}

void DnsDiscovery::lookup() {
  if (stopped_) return;
  resolver_.async_resolve(
      source_.name, source_.port,
      net::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec,
                                                              const net::ip::tcp::resolver::results_type& results) {
        if (self->stopped_) return;
        if (ec) {
          if (!self->failing_)  // once per outage, not every interval
            std::fprintf(stderr, "nexus gateway: %s: lookup failed (%s); the replicas stay as they were\n",
                         self->source_.spec.c_str(), ec.message().c_str());
          self->failing_ = true;
        } else {
          self->failing_ = false;
          std::set<std::string> urls;
          for (const auto& r : results) urls.insert(replica_url_of(r.endpoint().address(), self->source_.port));
          self->on_answer_(std::vector<std::string>(urls.begin(), urls.end()));
        }
        self->arm();
      }));
}

void DnsDiscovery::arm() {
  timer_.expires_after(interval_);
  timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->lookup();
  });
}

}  // namespace nexus::gateway
