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
// 5xx other than the documented ones that no request causes by itself
// (kServerSide: 501 for a transfer coding or embeddings the server lacks,
// 503 when full or draining) and a stream's error event of type
// server_error (the stub engine never fails, so any 500 is the server's own:
// issue 42's grammars past the matcher's bounds were 500s), a prompt outside
// 1..n_ctx-1 tokens reaching the engine (SyncBackend aborts).
// Mutations: json_mutator.h, on the body (Content-Length fixed after).
// Responses are matched to the requests the input holds (parsed here with
// the server's limits), so a HEAD response is read without a body.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "json_mutator.h"
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

// The 5xx answers docs/server.md lists that are not the server failing a
// request: (status, code).
constexpr std::pair<unsigned, std::string_view> kServerSide[] = {
    {501, "unsupported_transfer_encoding"},
    {501, "embeddings_unavailable"},
    {503, "too_many_connections"},
    {503, "server_shutting_down"},
};

bool server_side(unsigned status, std::string_view code) {
  for (const auto& [s, c] : kServerSide)
    if (s == status && (c == code || code.empty())) return true;
  return false;
}

void check_error_body(const http::response<http::string_body>& r) {
  const auto j = nlohmann::json::parse(r.body(), nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object() || !j["error"]["message"].is_string() ||
      !j["error"]["type"].is_string())
    finding("an error response without the JSON error body", r.body());
  if (r[http::field::content_type] != "application/json") finding("an error body not labelled JSON", r.body());
  const auto& code = j["error"]["code"];
  if (r.result_int() >= 500 && !server_side(r.result_int(), code.is_string() ? code.get<std::string>() : "?"))
    finding("a 5xx that is not one of the documented server-side answers", r.body());
}

// A streamed response's events: an error event of type server_error is the
// stream's 500.
void check_stream(const http::response<http::string_body>& r) {
  if (r[http::field::content_type].find("text/event-stream") == boost::beast::string_view::npos) return;
  std::string_view body = r.body();
  for (size_t at = body.find("data: {\"error\""); at != std::string_view::npos;
       at = body.find("data: {\"error\"", at + 1)) {
    const std::string_view line = body.substr(at + 6, body.find('\n', at) - (at + 6));
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_object() &&
        j["error"].value("type", "") == "server_error")
      finding("a stream's server_error event (the stream's 500)", line);
  }
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
    if (status >= 500 && head && !server_side(status, "")) finding("a 5xx to a HEAD", reply);
    if (status == 200 && !head) check_stream(r);
    ++k;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return nexus::fuzz::mutate_json_input(data, size, max_size, seed, nexus::fuzz::Framing::HttpBody);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string reply = nexus::fuzz::exchange(input);
  check_replies(reply, request_methods(input));
  return 0;
}
