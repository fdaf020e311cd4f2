// HttpClient: a small synchronous HTTP/1.1 client for the server tests
// (Boost.Beast). One object = one TCP connection, reused across requests
// (keep-alive); it never reconnects, so a test that makes N requests through
// one client proves the server kept the connection. Every network wait is
// bounded (default 30 s) and throws std::runtime_error on timeout, so a
// broken server fails a test instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nexus::test {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  bool keep_alive = false;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

class HttpClient {
 public:
  HttpClient(const std::string& host, uint16_t port,
             std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends a request and reads the whole response.
  HttpResponse request(const std::string& method, const std::string& target, const std::string& body = "",
                       const Headers& headers = {});
  HttpResponse get(const std::string& target) { return request("GET", target); }
  HttpResponse post(const std::string& target, const std::string& body) { return request("POST", target, body); }

  // Incremental reading: send(), then read_header(), then next_event()
  // until it returns nullopt (end of the body).
  void send(const std::string& method, const std::string& target, const std::string& body = "",
            const Headers& headers = {});
  HttpResponse read_header();  // status and headers; body empty
  // The next SSE event's text without its terminating blank line. At the end
  // of the body returns leftover bytes (if any, as a malformed last event)
  // and then nullopt.
  std::optional<std::string> next_event();
  HttpResponse finish();       // reads the rest; body = everything read since read_header()

  // Raw access for malformed-input tests.
  void write_raw(const std::string& bytes);
  std::string read_raw_some();             // whatever arrives next ("" at EOF)
  bool wait_closed_by_peer();              // reads until EOF (true) or timeout (false)

  uint16_t local_port() const;             // identifies the TCP connection
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits a whole SSE body into events; returns nullopt when it is not well
// framed (an event not starting with "data: ", or trailing bytes).
std::optional<std::vector<std::string>> split_sse(const std::string& body);

}  // namespace nexus::test
