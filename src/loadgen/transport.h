// Transport: how the load generator sends one request and watches its
// stream. The runner (runner.h) gives each worker its own Transport (from a
// TransportFactory), so one object is used by one thread at a time and may
// keep a connection between requests.
//
// Implemented: HTTP + SSE (http_transport.h), a new TCP connection per
// request or one kept-alive connection per worker; WebSocket sessions
// (ws_transport.h, /v1/realtime), one connection per bench session. Each
// stamps `start` before any I/O, pushes one entry to token_times for each
// message that carries text, fills usage from the server's final message and
// classifies failures with ErrorKind.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/workload.h"

namespace nexus::loadgen {

using Clock = std::chrono::steady_clock;

enum class ErrorKind {
  None,
  Connect,      // could not connect (refused, unreachable, DNS)
  HttpStatus,   // non-2xx status (http_status says which)
  Timeout,      // the per-request deadline passed
  Connection,   // the connection broke mid-response (reset, early EOF)
  Server,       // an error payload inside a 200 stream
  Protocol,     // a response we could not interpret (bad SSE/JSON, no [DONE])
};

const char* error_kind_name(ErrorKind k);  // "connect", "http_status", ...

struct RequestResult {
  Clock::time_point start;                // before connecting/sending
  Clock::time_point end;                  // stream finished (or failed)
  std::vector<Clock::time_point> token_times;  // arrival of each chunk that carried text
  std::string text;                       // generated text (for multi-turn history)
  std::optional<int64_t> prompt_tokens;   // server usage, when it sent one
  std::optional<int64_t> completion_tokens;
  std::optional<int64_t> cached_tokens;   // prompt tokens whose KV the server reused, when it says
  std::optional<double> server_ttft_ms;   // the server's own TTFT, when it reports one (ws: response.done)
  double connect_ms = 0;                  // time spent connecting (0 on a reused connection)
  bool reused_connection = false;
  ErrorKind error = ErrorKind::None;
  int http_status = 0;                    // 0 = no status line received
  std::string error_message;

  bool ok() const { return error == ErrorKind::None; }
  // "http_429", "timeout", ... ("" when ok): the key errors are counted by.
  std::string error_key() const;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Sends `req` and reads the streamed reply to its end. Never throws for a
  // failure of the request (that is reported in the result).
  virtual RequestResult run_request(const RequestSpec& req) = 0;
  virtual uint64_t connections_opened() const = 0;
};

using TransportFactory = std::function<std::unique_ptr<Transport>()>;

}  // namespace nexus::loadgen
