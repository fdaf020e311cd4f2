// Load through a gateway for its tests: one OpenAI request (streamed or
// not) on a kept-alive client, classified by how it ended, and counts over
// many; normal traffic in the background while a test does something
// hostile; whether a process still answers. Header-only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/http_client.h"
#include "support/metrics_text.h"

namespace nexus::test {

enum class CallEnd {
  Ok,           // 200 and, for a stream, [DONE] after no error event
  HttpError,    // a non-200 status
  StreamError,  // a stream that ended with an error event and [DONE]
  Cut,          // a stream that ended without [DONE] (must never happen)
  Exception,    // timeout or connection failure in the client
};

struct CallResult {
  CallEnd end = CallEnd::Exception;
  int status = 0;
  int events = 0;  // stream events with content before the end
  std::string error;
};

// POSTs `body` to `target` on `c`; a stream is read event by event.
inline CallResult call(HttpClient& c, const std::string& target, const nlohmann::json& body) {
  CallResult r;
  try {
    if (!body.value("stream", false)) {
      const HttpResponse res = c.post(target, body.dump());
      r.status = res.status;
      r.end = res.status == 200 ? CallEnd::Ok : CallEnd::HttpError;
      if (res.status != 200) r.error = res.body;
      return r;
    }
    c.send("POST", target, body.dump());
    const HttpResponse head = c.read_header();
    r.status = head.status;
    if (head.status != 200) {
      r.error = c.finish().body;
      r.end = CallEnd::HttpError;
      return r;
    }
    bool error_event = false, done = false;
    while (auto ev = c.next_event()) {
      if (*ev == "data: [DONE]") {
        done = true;
        continue;
      }
      if (ev->find("\"error\"") != std::string::npos) {
        error_event = true;
        r.error = *ev;
      } else {
        ++r.events;
      }
    }
    r.end = !done ? CallEnd::Cut : error_event ? CallEnd::StreamError : CallEnd::Ok;
  } catch (const std::exception& e) {
    r.end = CallEnd::Exception;
    r.error = e.what();
  }
  return r;
}

// Thread-safe tallies of CallResults, printed by the tests.
struct CallCounts {
  std::atomic<int> ok{0}, http_error{0}, stream_error{0}, cut{0}, exception{0};
  void add(const CallResult& r) {
    switch (r.end) {
      case CallEnd::Ok: ++ok; break;
      case CallEnd::HttpError: ++http_error; break;
      case CallEnd::StreamError: ++stream_error; break;
      case CallEnd::Cut: ++cut; break;
      case CallEnd::Exception: ++exception; break;
    }
  }
  int total() const { return ok + http_error + stream_error + cut + exception; }
  void print(const char* what) const {
    std::printf("[%s] total %d: ok %d, http_error %d, stream_error %d, cut %d, exception %d\n", what, total(), ok.load(),
                http_error.load(), stream_error.load(), cut.load(), exception.load());
  }
};

// The gateway's (or a replica's) metrics.
inline std::vector<MetricSample> scrape_metrics(uint16_t port) {
  HttpClient c("127.0.0.1", port, std::chrono::seconds(10));
  return parse_metrics_text(c.get("/metrics").body);
}

inline double metric_or(const std::vector<MetricSample>& s, const std::string& name,
                        const std::map<std::string, std::string>& labels, double fallback = 0) {
  return metric_value(s, name, labels).value_or(fallback);
}

// The error object of an OpenAI error body ({} when the body is not one).
inline nlohmann::json error_of(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_object() ? j["error"] : nlohmann::json::object();
}

// Whether the process on `port` (a replica or a gateway) answers GET /health with 200.
inline bool answers_health(uint16_t port) {
  try {
    HttpClient c("127.0.0.1", port, std::chrono::seconds(10));
    return c.get("/health").status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

// Normal non-streamed completions through a gateway, one after another on
// one kept-alive connection in a thread of their own, until finish() (which
// waits for at least one): each with a body of its own (the prompt is
// numbered, so one refused as a query of death is never sent again).
struct BackgroundTraffic {
  explicit BackgroundTraffic(uint16_t port, Headers headers = {}) {
    thread = std::thread([this, port, headers] {
      HttpClient c("127.0.0.1", port, std::chrono::seconds(30));
      for (int i = 0; i < 100'000 && (!stop || ok + query_of_death + failed == 0); ++i) {
        const nlohmann::json body = {{"prompt", "Once upon a time " + std::to_string(i)}, {"max_tokens", 8}};
        try {
          const HttpResponse r = c.request("POST", "/v1/completions", body.dump(), headers);
          if (r.status == 200) ++ok;
          else if (r.status == 502 && error_of(r.body).value("code", "") == "query_of_death") ++query_of_death;
          else ++failed;
        } catch (const std::exception&) {
          ++failed;
          return;
        }
      }
    });
  }
  ~BackgroundTraffic() {
    if (thread.joinable()) finish();  // (a test that threw)
  }
  void finish() {
    stop = true;
    thread.join();
    std::printf("[background traffic] %d ok, %d answered as a query of death, %d failed\n", ok.load(),
                query_of_death.load(), failed.load());
  }
  std::atomic<bool> stop{false};
  // query_of_death: in flight on the two replicas a query of death killed,
  // and answered with it (the gateway cannot tell them apart).
  std::atomic<int> ok{0}, query_of_death{0}, failed{0};
  std::thread thread;
};

}  // namespace nexus::test
