// GET /v1/stats/stream: the live dashboard's feed, one server-sent event a
// second, each `data: {snapshot}` with the fields of live_stats.h
// (docs/server.md, "Live stats"). Internal to HttpServer.
//
// StatsHub: a timer on its own strand of the I/O threads samples the
// backend's cumulative counters (Backend::live_counters: relaxed atomic
// reads and one copy of the engine's stats under its mutex, so the engine
// thread is never waited on), keeps the last minute of samples
// (LiveStatsWindow) and posts the snapshot to every stream. The engine
// thread does nothing for it. Sampling runs whether or not anyone listens,
// so the first snapshot a new stream gets (at once) covers the past minute.
//
// StatsStreamSession: one subscribed connection (HttpSession hands over its
// socket, as for a WebSocket upgrade). It writes the SSE header and then
// each snapshot, with at most one write in flight; a read stays pending so a
// client that goes away ends it. A client that falls more than
// max_pending_bytes behind is disconnected. The stream ends only when the
// client leaves or the server stops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/cors.h"
#include "server/live_stats.h"

namespace nexus::server {

class StatsStreamSession;

class StatsHub : public std::enable_shared_from_this<StatsHub> {
 public:
  using Sampler = std::function<LiveCounters()>;  // called on the hub's strand
  explicit StatsHub(Sampler sample, std::chrono::milliseconds interval = std::chrono::seconds(1));
  // Samples now and then every interval, on `strand`.
  void start(boost::asio::any_io_executor strand);
  // Not from an I/O thread: stops the timer, closes every stream and waits
  // (at most 2 s) until they are gone. Idempotent.
  void stop();
  // Adds a stream; returns the latest snapshot's SSE event (sent first), or
  // nullopt once stop() has begun (the stream must close).
  std::optional<std::string> subscribe(const std::shared_ptr<StatsStreamSession>& s);
  void unsubscribe(StatsStreamSession* s);

 private:
  void tick();

  Sampler sample_;
  std::chrono::milliseconds interval_;
  LiveStatsWindow window_;                            // the strand only
  std::optional<boost::asio::any_io_executor> strand_;  // set by start()
  std::optional<boost::asio::steady_timer> timer_;    // the strand only
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::string latest_;
  std::unordered_map<StatsStreamSession*, std::weak_ptr<StatsStreamSession>> streams_;
};

class StatsStreamSession : public std::enable_shared_from_this<StatsStreamSession> {
 public:
  // `chunked`: HTTP/1.1 chunked framing (else the body ends with the connection).
  StatsStreamSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<StatsHub> hub, size_t max_pending_bytes,
                     HeaderList cors, bool chunked);
  ~StatsStreamSession();
  void start();                    // on the socket's strand
  void push(std::string event);    // thread-safe: queue one SSE event
  void shutdown();                 // thread-safe: close the connection

 private:
  void enqueue(std::string_view bytes);
  void do_write();
  void do_read();
  void close();

  boost::asio::ip::tcp::socket socket_;
  std::shared_ptr<StatsHub> hub_;
  const size_t max_pending_bytes_;
  HeaderList cors_;
  const bool chunked_;
  std::string pending_, inflight_;
  char rbuf_[512];
  bool writing_ = false;
  bool closed_ = false;
};

}  // namespace nexus::server
