#include "server/stats_stream.h"

#include <future>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "server/sse.h"

namespace nexus::server {

namespace net = boost::asio;

namespace {

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StatsHub::StatsHub(Sampler sample, std::chrono::milliseconds interval)
    : sample_(std::move(sample)), interval_(interval) {
  latest_ = sse_event(window_.snapshot(unix_ms()).dump());
}

void StatsHub::start(net::any_io_executor strand) {
  strand_ = strand;
  timer_.emplace(strand);
  net::post(strand, [self = shared_from_this()] { self->tick(); });
}

void StatsHub::tick() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
  }
  window_.add(LiveStatsWindow::Clock::now(), sample_());
  std::string event = sse_event(window_.snapshot(unix_ms()).dump());
  std::vector<std::shared_ptr<StatsStreamSession>> live;
  {
    std::lock_guard lock(mu_);
    latest_ = event;
    for (auto& [ptr, weak] : streams_)
      if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->push(event);
  timer_->expires_after(interval_);
  timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->tick();
  });
}

void StatsHub::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (strand_) {  // started
    // The timer belongs to its strand: cancel it there.
    std::promise<void> cancelled;
    // Destroyed there too: the timer must not outlive the io_context.
    net::post(*strand_, [this, &cancelled] {
      timer_->cancel();
      timer_.reset();
      cancelled.set_value();
    });
    cancelled.get_future().wait();
    // The strand too: it points into the io_context's strand service, which
    // the server destroys before this hub (ASan: member access in
    // ~strand_impl after ~io_context). tick() stops at stopped_ before it.
    strand_.reset();
  }
  std::vector<std::shared_ptr<StatsStreamSession>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [ptr, weak] : streams_)
      if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->shutdown();
  live.clear();  // outside the lock: the last reference may run ~StatsStreamSession
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::seconds(2), [this] { return streams_.empty(); });
}

std::optional<std::string> StatsHub::subscribe(const std::shared_ptr<StatsStreamSession>& s) {
  std::lock_guard lock(mu_);
  if (stopped_) return std::nullopt;
  streams_.emplace(s.get(), s);
  return latest_;
}

void StatsHub::unsubscribe(StatsStreamSession* s) {
  std::lock_guard lock(mu_);
  streams_.erase(s);
  cv_.notify_all();
}

StatsStreamSession::StatsStreamSession(net::ip::tcp::socket socket, std::shared_ptr<StatsHub> hub,
                                       size_t max_pending_bytes, HeaderList cors, bool chunked)
    : socket_(std::move(socket)),
      hub_(std::move(hub)),
      max_pending_bytes_(max_pending_bytes),
      cors_(std::move(cors)),
      chunked_(chunked) {}

StatsStreamSession::~StatsStreamSession() { hub_->unsubscribe(this); }

void StatsStreamSession::start() {
  std::string head = fmt::format(
      "HTTP/1.1 200 OK\r\nServer: nexus\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Connection: {}\r\n{}",
      chunked_ ? "keep-alive" : "close", chunked_ ? "Transfer-Encoding: chunked\r\n" : "");
  for (const auto& [k, v] : cors_) head += k + ": " + v + "\r\n";
  const std::optional<std::string> latest = hub_->subscribe(shared_from_this());
  if (!latest) return close();  // the server is stopping
  pending_ = head + "\r\n";
  // An EventSource reconnects after `retry` ms when the stream drops.
  enqueue("retry: 1000\n\n" + *latest);
  do_read();
}

void StatsStreamSession::push(std::string event) {
  net::post(socket_.get_executor(), [self = shared_from_this(), event = std::move(event)] { self->enqueue(event); });
}

void StatsStreamSession::shutdown() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
}

void StatsStreamSession::enqueue(std::string_view bytes) {
  if (closed_) return;
  if (chunked_) {
    pending_ += fmt::format("{:x}\r\n", bytes.size());
    pending_ += bytes;
    pending_ += "\r\n";
  } else {
    pending_ += bytes;
  }
  if (pending_.size() > max_pending_bytes_) return close();  // the client does not read
  if (!writing_) do_write();
}

void StatsStreamSession::do_write() {
  writing_ = true;
  inflight_.swap(pending_);
  pending_.clear();
  net::async_write(socket_, net::buffer(inflight_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
    self->writing_ = false;
    self->inflight_.clear();
    if (ec) return self->close();
    if (!self->closed_ && !self->pending_.empty()) self->do_write();
  });
}

void StatsStreamSession::do_read() {
  // The client sends nothing; EOF or an error means it left. Anything it
  // does send is read and dropped.
  socket_.async_read_some(net::buffer(rbuf_), [self = shared_from_this()](boost::system::error_code ec, size_t) {
    if (ec) return self->close();
    if (!self->closed_) self->do_read();
  });
}

void StatsStreamSession::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  socket_.shutdown(net::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

}  // namespace nexus::server
