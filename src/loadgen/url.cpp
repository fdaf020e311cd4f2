#include "loadgen/url.h"

#include <algorithm>

#include "util/error.h"

namespace nexus::loadgen {

ServerUrl parse_server_url(const std::string& url) {
  ServerUrl u;
  u.tls = url.rfind("https://", 0) == 0;
  const std::string scheme = u.tls ? "https://" : "http://";
  if (u.tls) u.port = "443";
  if (url.rfind(scheme, 0) != 0) throw Error("--url " + url + ": expected http://HOST[:PORT][/PATH] or https://...");
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.base_path = rest.substr(slash);
  while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  if (u.base_path.size() >= 3 && u.base_path.compare(u.base_path.size() - 3, 3, "/v1") == 0) {
    u.base_path.resize(u.base_path.size() - 3);
  }
  if (authority.find('@') != std::string::npos) throw Error("--url " + url + ": credentials in the URL are not supported");
  if (!authority.empty() && authority[0] == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw Error("--url " + url + ": unterminated [IPv6] address");
    u.host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty()) {
      if (authority[0] != ':') throw Error("--url " + url + ": junk after the [IPv6] address");
      u.port = authority.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) u.port = authority.substr(colon + 1);
  }
  if (u.host.empty()) throw Error("--url " + url + ": no host");
  const bool digits = !u.port.empty() && u.port.size() <= 5 &&
                      std::all_of(u.port.begin(), u.port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoi(u.port) < 1 || std::stoi(u.port) > 65535) {
    throw Error("--url " + url + ": invalid port '" + u.port + "'");
  }
  return u;
}

std::string ServerUrl::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (tls ? "https://" : "http://") + (v6 ? "[" + host + "]" : host) + ":" + port + base_path;
}

}  // namespace nexus::loadgen
