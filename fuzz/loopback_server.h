// Shared by fuzz_http and fuzz_realtime: the real HttpServer (HttpSession,
// RealtimeSession, router, parsers; all of src/server compiled into the
// target with coverage) on an ephemeral loopback port, over SyncBackend, a
// stub engine that answers each submit() at once.
//
// SyncBackend: tokens are bytes + 2 with BOS = 1 (n_ctx 4096, vocabulary 258),
// as tests/support/fake_backend.h. submit() delivers min(max_tokens, 4)
// token events (64 under a grammar) and the final one from inside the call:
// the relays post them to the connection's strand, so the session handles them after
// start_generation / create_response returned, as with the real engine, and
// the run is deterministic (no engine thread, no timing). A request's
// grammar is followed as the engine follows it (engine.cpp): a Matcher over
// the stub's vocabulary picks each token among those it allows (from a hash
// of the prompt); a GrammarLimit fails the request with error_code
// grammar_too_complex (the client's 400), any other exception as the
// server's fault (a 500).
//
// exchange(): one TCP connection per input: write the bytes, half-close,
// read until the server closes. A server that does not close within 10 s is
// a finding (abort: a hang).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/vocab_trie.h"
#include "server/backend.h"
#include "server/http_server.h"

namespace nexus::fuzz {

class SyncBackend final : public server::Backend {
 public:
  const std::string& model_id() const override { return id_; }
  // 4096: room for a chat with tools (rendered into the prompt, byte by
  // byte), so that forced tool calls reach their grammars; a 64 KiB body
  // can still pass it.
  int32_t n_ctx() const override { return 4096; }
  int32_t n_vocab() const override { return 258; }
  const server::ChatTemplate& chat_template() const override { return chat_; }
  std::vector<int32_t> tokenize(std::string_view text, bool) const override {
    std::vector<int32_t> ids{1};
    for (unsigned char c : text) ids.push_back(c + 2);
    return ids;
  }
  std::vector<int32_t> tokenize_continuation(std::string_view text, bool) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c + 2);
    return ids;
  }
  std::shared_ptr<RequestHandle> submit(GenerationRequest req, EventCallback cb) override {
    if (req.prompt.empty() || req.prompt.size() >= static_cast<size_t>(n_ctx())) std::abort();  // checked first
    auto h = std::make_shared<RequestHandle>();
    GenerationEvent final;
    final.done = true;
    final.finish = FinishReason::Length;
    final.usage.prompt_tokens = static_cast<int32_t>(req.prompt.size());
    try {
      std::unique_ptr<grammar::Matcher> m;
      if (req.grammar) m = std::make_unique<grammar::Matcher>(req.grammar, vocab());
      uint64_t choice = 1469598103934665603ull;  // the grammar's choices: from the prompt
      for (int32_t id : req.prompt) choice = (choice ^ static_cast<uint64_t>(id)) * 1099511628211ull;
      // With a grammar, its bytes (up to 64: a short tool call whole, for the
      // parsers after); without, 4 fixed pieces.
      for (int32_t i = 0; i < std::min(req.stop.max_tokens, m ? 64 : 4); ++i) {
        GenerationEvent ev;
        ev.token = m ? follow(*m, choice) : 2 + i;
        if (ev.token < 0) {
          final.finish = FinishReason::Stop;
          break;
        }
        ev.text = m ? vocab()->piece(ev.token) : i == 2 ? "\xE2\x82" : "t ";  // a UTF-8 sequence cut in two
        final.usage.completion_tokens++;
        cb(ev);
      }
    } catch (const std::exception& e) {
      final.finish = FinishReason::Error;
      final.error = e.what();
      final.error_code = dynamic_cast<const grammar::GrammarLimit*>(&e) ? "grammar_too_complex" : "";
    }
    cb(final);
    return h;
  }
  std::string metrics_text() const override { return "# TYPE fuzz_total counter\nfuzz_total 1\n"; }

 private:
  // The pieces of the stub's tokens: ids 0 and 1 none, id b + 2 the byte b.
  static const std::shared_ptr<const grammar::VocabTrie>& vocab() {
    static const auto v = [] {
      std::vector<std::string> pieces(2);
      for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
      return std::make_shared<const grammar::VocabTrie>(pieces);
    }();
    return v;
  }
  // The next token under the grammar, picked by `h` among those it allows,
  // or -1 for the end: where a sentence is complete (a quarter of the time,
  // as an end-of-generation token would be) or nothing is allowed.
  static int32_t follow(grammar::Matcher& m, uint64_t& h) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    if (m.can_end() && (h >> 62) == 0) return -1;
    const std::vector<uint64_t>& mask = m.allowed_tokens();
    std::vector<int32_t> allowed;
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint64_t bits = mask[w]; bits; bits &= bits - 1)
        allowed.push_back(static_cast<int32_t>(w * 64) + __builtin_ctzll(bits));
    if (allowed.empty()) return -1;
    const int32_t id = allowed[(h >> 33) % allowed.size()];
    if (!m.accept(vocab()->piece(id))) std::abort();  // allowed_tokens() allowed it
    return id;
  }

  const std::string id_ = "fuzz-model";
  const server::ChatTemplate chat_;  // the plain fallback
};

// The server, started on first use and kept for the process (libFuzzer runs
// every input in one process).
inline server::HttpServer& loopback_server() {
  static SyncBackend backend;
  static server::HttpServer* server = [] {
    server::HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.io_threads = 1;
    o.body_limit = 64 << 10;
    o.idle_timeout = std::chrono::seconds(5);
    o.header_timeout = std::chrono::seconds(5);
    o.body_timeout = std::chrono::seconds(5);
    o.cors_allow_origins = {"https://app.example"};
    auto* s = new server::HttpServer(backend, o);  // never destroyed: libFuzzer exits without unwinding
    s->start();
    return s;
  }();
  return *server;
}

// Every call below retries on EINTR: libFuzzer's timers interrupt them.
// Connects to the loopback server; -1 on failure. SO_LINGER 0: the close
// resets the connection, so neither side keeps it in TIME_WAIT (at a few
// hundred inputs a second, TIME_WAIT entries would use up the ephemeral
// ports within minutes and connect() would fail).
inline int connect_loopback() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const linger abortive{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(loopback_server().port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("fuzz: connect");
    close(fd);
    return -1;
  }
  return fd;
}

// Writes what the peer takes (it may close early, e.g. after a 400).
inline void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;  // libFuzzer's timers (SIGALRM)
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads until EOF or an error; aborts when the server holds the connection
// open for 10 s after the client is done.
inline std::string read_until_closed(int fd) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char buf[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::fprintf(stderr, "fuzz: the server did not close the connection within 10 s\n");
      std::abort();
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// With NEXUS_FUZZ_SHOW set, what the server sent (its first 4,000 bytes)
// goes to stderr: to see how a seed is answered (`fuzz_http SEED`).
inline void show(std::string_view reply) {
  static const bool on = std::getenv("NEXUS_FUZZ_SHOW") != nullptr;
  if (!on) return;
  std::fprintf(stderr, "--- reply (%zu bytes)\n", reply.size());
  std::fwrite(reply.data(), 1, std::min<size_t>(reply.size(), 4000), stderr);  // NUL bytes too
  std::fputc('\n', stderr);
}

// Sends `bytes` on a new connection, half-closes, returns all the server sent.
inline std::string exchange(std::string_view bytes) {
  const int fd = connect_loopback();
  if (fd < 0) std::abort();
  write_all(fd, bytes);
  shutdown(fd, SHUT_WR);
  std::string reply = read_until_closed(fd);
  close(fd);
  show(reply);
  return reply;
}

}  // namespace nexus::fuzz
