// libFuzzer target: client events through the realtime path of `nexus
// serve`: a WebSocket session on the real HttpServer (loopback_server.h),
// so the frames go through Beast's WebSocket reader (and FrameLengthGuard),
// the event parser (realtime_protocol.h), RealtimeSession's logic
// (session.update, input.append, response.create/cancel/redirect,
// session.close) and the conversation's tokenization, with a stub engine
// that answers at once.
//
// Input: the text of client events, one per line ('\n'); each line is sent
// as one masked text frame, then {"type":"session.close"}, and the
// connection is half-closed. An input that starts with 0xFF is sent after
// the handshake as raw frame bytes instead.
// Findings besides ASan/UBSan reports: a server that keeps the connection
// open (10 s), a handshake not answered 101, a server frame that is not a
// well-formed unmasked frame, a text message (fragments joined) that is not
// a JSON object with a string "type", a response.done with finish_reason
// "error" (the stub engine never fails: the session's own failure, a 500's
// equivalent).
// Mutations: json_mutator.h, on one event line at a time.
#include <cstdint>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "json_mutator.h"
#include "loopback_server.h"

namespace {

[[noreturn]] void finding(const char* what, std::string_view detail) {
  std::fprintf(stderr, "fuzz_realtime: %s\n%.*s\n", what, static_cast<int>(std::min<size_t>(detail.size(), 2000)),
               detail.data());
  std::abort();
}

// One masked client frame (RFC 6455 section 5.2); the mask is fixed.
std::string client_frame(unsigned opcode, std::string_view payload) {
  std::string f;
  f += static_cast<char>(0x80 | opcode);
  const size_t n = payload.size();
  if (n < 126) {
    f += static_cast<char>(0x80 | n);
  } else if (n < 65536) {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>(n >> 8);
    f += static_cast<char>(n & 0xff);
  } else {
    f += static_cast<char>(0x80 | 127);
    for (int s = 56; s >= 0; s -= 8) f += static_cast<char>((static_cast<uint64_t>(n) >> s) & 0xff);
  }
  const unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
  for (unsigned char m : mask) f += static_cast<char>(m);
  for (size_t i = 0; i < n; ++i) f += static_cast<char>(payload[i] ^ mask[i % 4]);
  return f;
}

// A whole server text message.
void check_event(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) finding("a server event without a type", text);
  if (j["type"] == "response.done" && j.contains("response") && j["response"].is_object() &&
      j["response"].value("finish_reason", "") == "error")
    finding("a response that failed", text);
}

// Checks the server's frames after the 101 response.
void check_frames(std::string_view s) {
  std::string message;
  bool in_message = false;
  while (!s.empty()) {
    if (s.size() < 2) return;  // cut by the close: tolerated
    const auto b0 = static_cast<unsigned char>(s[0]), b1 = static_cast<unsigned char>(s[1]);
    if (b1 & 0x80) finding("a masked server frame", s);
    uint64_t len = b1 & 0x7f;
    size_t at = 2;
    if (len >= 126) {
      const size_t ext = len == 126 ? 2 : 8;
      if (s.size() < at + ext) return;
      len = 0;
      for (size_t i = 0; i < ext; ++i) len = (len << 8) | static_cast<unsigned char>(s[at + i]);
      at += ext;
    }
    if (s.size() - at < len) return;
    const std::string_view payload = s.substr(at, static_cast<size_t>(len));
    const unsigned op = b0 & 0x0f;
    const bool fin = b0 & 0x80;
    if (op == 1 || op == 0) {
      // A message may come in fragments (Beast writes 4 KiB frames):
      // a text frame, then continuations, the last with FIN.
      if ((op == 0) != in_message)
        finding(op == 0 ? "a continuation outside a message" : "a message inside a message", s);
      message.append(payload);
      in_message = !fin;
      if (fin) {
        check_event(message);
        message.clear();
      }
    } else if (op != 8 && op != 9 && op != 10) {
      finding("an unexpected server opcode", s);
    }
    s.remove_prefix(at + static_cast<size_t>(len));
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return nexus::fuzz::mutate_json_input(data, size, max_size, seed, nexus::fuzz::Framing::Lines);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string out =
      "GET /v1/realtime HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  // Frames go only after the 101 (RFC 6455 section 4.1): read it first.
  const int fd = nexus::fuzz::connect_loopback();
  if (fd < 0) std::abort();
  nexus::fuzz::write_all(fd, out);
  std::string reply;
  while (reply.find("\r\n\r\n") == std::string::npos) {
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;  // libFuzzer's timers (SIGALRM)
    if (n <= 0) finding("the handshake got no answer", reply);
    reply.append(buf, static_cast<size_t>(n));
  }
  if (!reply.starts_with("HTTP/1.1 101")) finding("the handshake was refused", reply);
  out.clear();
  if (!input.empty() && static_cast<unsigned char>(input[0]) == 0xFF) {
    out.assign(input.substr(1));
  } else {
    std::string_view rest = input;
    while (!rest.empty()) {
      const size_t eol = rest.find('\n');
      out += client_frame(1, rest.substr(0, eol));
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    }
    out += client_frame(1, R"({"type":"session.close"})");
  }
  nexus::fuzz::write_all(fd, out);
  shutdown(fd, SHUT_WR);
  reply = reply.substr(reply.find("\r\n\r\n") + 4) + nexus::fuzz::read_until_closed(fd);
  close(fd);
  nexus::fuzz::show(reply);
  check_frames(reply);
  return 0;
}
