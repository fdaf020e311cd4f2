// Blocking, time-bounded I/O for the bench transports: runs ONE asynchronous
// Asio/Beast operation to completion on a private io_context, or gives up at
// a deadline. Used by http_transport.cpp and ws_transport.cpp.
#pragma once

#include <chrono>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/error.hpp>

namespace nexus::loadgen {

// start(handler) must begin one operation on `ioc` that calls handler(ec,
// ...) once. Returns that ec; or, when `deadline` passes first, calls abort()
// -- which must close the operation's socket so that it completes with an
// error --, lets the operation finish, and returns beast::error::timeout.
template <class Start, class Abort>
boost::beast::error_code run_until_deadline(boost::asio::io_context& ioc, std::chrono::steady_clock::time_point deadline,
                                            Start&& start, Abort&& abort) {
  bool done = false;
  boost::beast::error_code err;
  start([&](boost::beast::error_code ec, auto&&...) {
    done = true;
    err = ec;
  });
  ioc.restart();
  ioc.run_until(deadline);
  if (done) return err;
  abort();
  ioc.restart();
  ioc.run();  // lets the aborted operation finish
  return boost::beast::error::timeout;
}

}  // namespace nexus::loadgen
