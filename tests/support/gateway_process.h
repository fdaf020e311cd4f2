// GatewayProcess: `nexus gateway` on an OS-picked loopback port as a child
// process, in front of replicas started by the test (ServeProcess).
#pragma once

#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "support/child_process.h"
#include "support/serve_process.h"
#include "support/test_support.h"

namespace nexus::test {

inline std::string replica_url(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

struct GatewayProcess {
  // port stays 0 when the gateway did not print its startup line in time.
  GatewayProcess(const std::vector<uint16_t>& replica_ports, const std::vector<std::string>& extra_args = {})
      : proc(args(replica_ports, extra_args)) {
    const auto line = proc.read_line();
    std::smatch m;
    if (line && std::regex_match(*line, m, std::regex(R"(listening on https?://127\.0\.0\.1:(\d+))")))
      port = static_cast<uint16_t>(std::stoi(m[1]));
  }
  ChildProcess proc;
  uint16_t port = 0;

 private:
  static std::vector<std::string> args(const std::vector<uint16_t>& ports, const std::vector<std::string>& extra) {
    std::vector<std::string> a{nexus_binary(), "gateway", "--listen", "127.0.0.1:0"};
    for (uint16_t p : ports) {
      a.push_back("--replica");
      a.push_back(replica_url(p));
    }
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

// `n` replicas of `model` (extra args for each) and their ports; a replica
// that did not start has port 0. `binary`, `prefix`: as ServeProcess's.
struct ReplicaSet {
  ReplicaSet(const std::string& model, int n, const std::vector<std::string>& extra = {},
             const std::string& binary = nexus_binary(), const std::vector<std::string>& prefix = {}) {
    for (int i = 0; i < n; ++i) {
      servers.push_back(std::make_unique<ServeProcess>(model, extra, binary, prefix));
      ports.push_back(servers.back()->port);
    }
  }
  bool all_started() const {
    for (uint16_t p : ports)
      if (p == 0) return false;
    return true;
  }
  std::vector<std::unique_ptr<ServeProcess>> servers;
  std::vector<uint16_t> ports;
};

}  // namespace nexus::test
