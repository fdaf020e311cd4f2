// libFuzzer target: raw bytes through the whole HTTP request path of `nexus
// serve`: one TCP connection to the real HttpServer (loopback_server.h),
// the input written as is and the connection half-closed, so the bytes go
// through Beast's parser, the framing checks (request_framing.h), the
// dispatch (request_dispatch.h: HEAD, OPTIONS/CORS, the WebSocket handshake
// checks), the router and request parsing, to an error reply or a
// submission to the stub engine and the formatted response.
//
// Findings besides ASan/UBSan reports: a server that keeps the connection
// open after the client is done (10 s), a response that does not parse as
// HTTP/1.1, an error (4xx/5xx) whose body is not the JSON error object, a
// prompt outside 1..n_ctx-1 tokens reaching the engine (SyncBackend aborts).
// Responses are matched to the requests the input holds (parsed here with
// the server's limits), so a HEAD response is read without a body.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "loopback_server.h"
#include "server/request_framing.h"

namespace http = boost::beast::http;

namespace {

[[noreturn]] void finding(const char* what, std::string_view detail) {
  std::fprintf(stderr, "fuzz_http: %s\n%.*s\n", what, static_cast<int>(std::min<size_t>(detail.size(), 2000)),
               detail.data());
  std::abort();
}

// The methods of the whole requests at the start of `input`, in order.
std::vector<http::verb> request_methods(std::string_view input) {
  std::vector<http::verb> methods;
  while (!input.empty()) {
    http::request_parser<http::string_body> p;
    p.header_limit(nexus::server::kMaxHeaderBytes);
    p.body_limit(64 << 10);
    p.eager(true);
    boost::beast::error_code ec;
    const size_t n = p.put(boost::asio::buffer(input.data(), input.size()), ec);
    if (ec || !p.is_done()) break;
    methods.push_back(p.get().method());
    input.remove_prefix(n);
    if (!p.get().keep_alive()) break;
  }
  return methods;
}

void check_error_body(const http::response<http::string_body>& r) {
  const auto j = nlohmann::json::parse(r.body(), nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object() || !j["error"]["message"].is_string() ||
      !j["error"]["type"].is_string())
    finding("an error response without the JSON error body", r.body());
  if (r[http::field::content_type] != "application/json") finding("an error body not labelled JSON", r.body());
}

// Parses the responses in `reply`; request_methods says which were HEAD.
void check_replies(std::string_view reply, const std::vector<http::verb>& methods) {
  size_t k = 0;
  while (!reply.empty()) {
    http::response_parser<http::string_body> p;
    p.body_limit(16 << 20);
    p.eager(true);
    if (k < methods.size() && methods[k] == http::verb::head) p.skip(true);
    boost::beast::error_code ec;
    const size_t n = p.put(boost::asio::buffer(reply.data(), reply.size()), ec);
    if (ec == http::error::need_more) return;  // cut short (closed while streaming): tolerated
    if (ec) finding("a response that does not parse", reply);
    if (!p.is_done()) {
      p.put_eof(ec);  // a body delimited by the close
      if (ec || !p.is_done()) return;
    }
    const auto& r = p.get();
    const unsigned status = r.result_int();
    if (status < 100 || status > 599) finding("status out of range", reply);
    if (status == 101) return;  // the rest is WebSocket frames
    reply.remove_prefix(n);
    if (status == 100) continue;  // interim: no request of its own
    const bool head = k < methods.size() && methods[k] == http::verb::head;
    if (status >= 400 && !head) check_error_body(r);
    ++k;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string reply = nexus::fuzz::exchange(input);
  check_replies(reply, request_methods(input));
  return 0;
}
