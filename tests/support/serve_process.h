// ServeProcess: `nexus serve` on an OS-picked loopback port as a child
// process (killed by ChildProcess's destructor if the test does not stop it).
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "support/child_process.h"
#include "support/test_support.h"

namespace nexus::test {

struct ServeProcess {
  // port stays 0 when the server did not print its startup line in time.
  // `binary`: nexus_binary(), or one that runs the same CLI (nexus_faulty:
  // `prefix` goes before `serve`, e.g. its --crash-on-body TEXT).
  explicit ServeProcess(const std::string& model, const std::vector<std::string>& extra_args = {},
                        const std::string& binary = nexus_binary(), const std::vector<std::string>& prefix = {})
      : proc(args(binary, prefix, model, extra_args)) {
    const auto line = proc.read_line();
    std::smatch m;
    if (line && std::regex_match(*line, m, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))")))
      port = static_cast<uint16_t>(std::stoi(m[1]));
  }
  ChildProcess proc;
  uint16_t port = 0;

 private:
  static std::vector<std::string> args(const std::string& binary, const std::vector<std::string>& prefix,
                                       const std::string& model, const std::vector<std::string>& extra) {
    std::vector<std::string> a{binary};
    a.insert(a.end(), prefix.begin(), prefix.end());
    a.insert(a.end(), {"serve", "-m", model, "--port", "0", "--threads", "1"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

}  // namespace nexus::test
