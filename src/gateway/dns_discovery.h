// DNS discovery of replicas (`nexus gateway --replicas-from dns:NAME:PORT`),
// the way a Kubernetes headless Service lists its ready pods: NAME is
// resolved every interval, and each address of the answer is a replica
// http://ADDRESS:PORT (replica_set.h). An address that leaves the answer is
// unlisted (no new requests; those it has go on) and listed again when it
// comes back. A lookup that fails changes nothing: a DNS hiccup must not
// empty the gateway (the replicas' own health checks still judge them).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

namespace nexus::gateway {

struct DnsSource {
  std::string name, port;
  std::string spec;  // as given, for messages
};

// "dns:NAME:PORT" (PORT 1-65535); throws nexus::Error saying what is wrong.
DnsSource parse_dns_source(const std::string& spec);

// What one answer changes. `known`: the replica URLs this source added so
// far with whether each is listed, in the order added; `others`: URLs the
// gateway has from elsewhere (--replica), never added twice; `answer`: the
// URLs of the addresses resolved now.
struct DnsChanges {
  std::vector<std::string> added;   // new URLs, in answer order
  std::vector<size_t> unlisted;     // indices into `known`
  std::vector<size_t> relisted;     // indices into `known`
};
DnsChanges reconcile(const std::vector<std::pair<std::string, bool>>& known, const std::vector<std::string>& others,
                     const std::vector<std::string>& answer);

// The URL of a resolved address: http://A.B.C.D:PORT or http://[V6]:PORT.
std::string replica_url_of(const boost::asio::ip::address& a, const std::string& port);

// Resolves a source every interval, on a strand, and hands each successful
// answer (replica URLs, sorted, deduplicated) to on_answer on that strand.
class DnsDiscovery : public std::enable_shared_from_this<DnsDiscovery> {
 public:
  using OnAnswer = std::function<void(const std::vector<std::string>& urls)>;
  DnsDiscovery(boost::asio::any_io_executor strand, DnsSource source, std::chrono::milliseconds interval,
               OnAnswer on_answer);
  void start();  // the first lookup at once
  void stop();   // thread-safe

 private:
  void lookup();
  void arm();

  boost::asio::any_io_executor strand_;
  DnsSource source_;
  std::chrono::milliseconds interval_;
  OnAnswer on_answer_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  bool failing_ = false;  // the last lookup failed (logged once)
};

}  // namespace nexus::gateway
