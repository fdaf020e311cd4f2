// The server a benchmark talks to, from a URL such as http://127.0.0.1:8080,
// http://host:8000/prefix or https://host (TLS; port 443 by default).
// A trailing "/v1" is dropped: endpoints are appended as /v1/....
#pragma once

#include <string>

namespace nexus::loadgen {

struct ServerUrl {
  std::string host;
  std::string port = "80";
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  bool tls = false;       // https://

  std::string to_string() const;  // http(s)://host:port/prefix
};

ServerUrl parse_server_url(const std::string& url);  // throws nexus::Error

}  // namespace nexus::loadgen
