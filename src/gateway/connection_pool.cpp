#include "gateway/connection_pool.h"

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>

namespace nexus::gateway {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Whether the peer has closed (FIN or RST) or sent something unexpected:
// an idle HTTP connection must have nothing to read.
bool peer_still_idle(tcp::socket& s) {
  if (!s.is_open()) return false;
  char c;
  const ssize_t n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

ConnectionPool::ConnectionPool(net::any_io_executor ex, const std::string& host, const std::string& port, size_t max_idle)
    : ex_(std::move(ex)), host_(host), port_(port), max_idle_(max_idle) {
  net::io_context resolve_ctx;
  tcp::resolver resolver(resolve_ctx);
  boost::system::error_code ec;
  const auto results = resolver.resolve(host, port, ec);
  if (ec) {
    resolve_error_ = ec.message();
    return;
  }
  for (const auto& r : results) endpoints_.push_back(r.endpoint());
}

ConnectionPool::Endpoints ConnectionPool::endpoints() const {
  std::lock_guard lock(mu_);
  return endpoints_;
}

bool ConnectionPool::set_endpoints(Endpoints eps, const std::string& error) {
  std::vector<std::unique_ptr<Socket>> old;  // closed outside the lock
  std::lock_guard lock(mu_);
  resolve_error_ = eps.empty() ? (error.empty() ? "no address" : error) : "";
  if (eps == endpoints_) return false;
  endpoints_ = std::move(eps);
  old.swap(idle_);
  return true;
}

std::string ConnectionPool::resolve_error() const {
  std::lock_guard lock(mu_);
  return resolve_error_;
}

std::unique_ptr<ConnectionPool::Socket> ConnectionPool::take_idle() {
  std::lock_guard lock(mu_);
  while (!idle_.empty()) {
    std::unique_ptr<Socket> s = std::move(idle_.back());
    idle_.pop_back();
    if (peer_still_idle(*s)) {
      ++reused_;
      return s;
    }
  }
  return nullptr;
}

std::unique_ptr<ConnectionPool::Socket> ConnectionPool::fresh() {
  {
    std::lock_guard lock(mu_);
    ++opened_;
  }
  return std::make_unique<Socket>(ex_);
}

void ConnectionPool::give_back(std::unique_ptr<Socket> s) {
  if (!s || !s->is_open()) return;
  std::lock_guard lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(s));
}

void ConnectionPool::clear() {
  std::vector<std::unique_ptr<Socket>> old;
  std::lock_guard lock(mu_);
  old.swap(idle_);
}

uint64_t ConnectionPool::opened() const {
  std::lock_guard lock(mu_);
  return opened_;
}

uint64_t ConnectionPool::reused() const {
  std::lock_guard lock(mu_);
  return reused_;
}

}  // namespace nexus::gateway
