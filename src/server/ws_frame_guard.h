// FrameLengthGuard: a stream layer under Beast's websocket::stream that
// makes a frame whose 64-bit payload length has its most significant bit set
// a protocol error at once. RFC 6455 section 5.2: "the most significant bit
// MUST be 0". Beast 1.74 accepts such a length (parse_fh checks only that it
// is canonical, >= 65536) and, with no message size limit, waits for 2^63
// bytes that never come.
//
// The guard follows the frame boundaries of the bytes read (FrameScanner:
// header, extended length, masking key, payload skipped by its length) and,
// on such a length, rewrites the 8 length bytes to zero as they pass. A
// 64-bit length under 65536 is not canonical, which Beast refuses with
// error::bad_size: it sends a close frame 1002 (protocol error) and fails the
// read, and the session ends. Nothing else is changed; once the guard has
// rewritten a length it stops scanning (the connection is over).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/websocket/teardown.hpp>

namespace nexus::server {

// Follows RFC 6455 frame headers over a byte stream (client to server).
class FrameScanner {
 public:
  // Scans the next `n` bytes of the stream, rewriting an invalid 64-bit
  // length to zero in place.
  void scan(unsigned char* data, size_t n);
  bool rewrote() const { return state_ == State::Done; }

 private:
  enum class State { Opcode, Length, ExtLength, MaskKey, Payload, Done };
  State state_ = State::Opcode;
  bool masked_ = false;
  bool zeroing_ = false;
  int ext_left_ = 0, ext_size_ = 0, mask_left_ = 0;
  uint64_t payload_left_ = 0;
  void after_length();
};

template <class NextLayer>
class FrameLengthGuard {
 public:
  using executor_type = typename NextLayer::executor_type;

  template <class... Args>
  explicit FrameLengthGuard(Args&&... args) : next_(std::forward<Args>(args)...) {}

  executor_type get_executor() noexcept { return next_.get_executor(); }
  NextLayer& next_layer() noexcept { return next_; }
  const NextLayer& next_layer() const noexcept { return next_; }

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return boost::asio::async_compose<ReadToken, void(boost::beast::error_code, std::size_t)>(
        ReadOp<MutableBufferSequence>{*this, buffers}, token, next_);
  }

  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return next_.async_write_some(buffers, std::forward<WriteToken>(token));
  }

 private:
  template <class Buffers>
  struct ReadOp {
    FrameLengthGuard& guard;
    Buffers buffers;
    bool started = false;
    template <class Self>
    void operator()(Self& self, boost::beast::error_code ec = {}, std::size_t n = 0) {
      if (!started) {
        started = true;
        return guard.next_.async_read_some(buffers, std::move(self));
      }
      size_t left = n;
      for (auto it = boost::asio::buffer_sequence_begin(buffers);
           left > 0 && it != boost::asio::buffer_sequence_end(buffers); ++it) {
        const boost::asio::mutable_buffer b(*it);
        const size_t k = b.size() < left ? b.size() : left;
        guard.scanner_.scan(static_cast<unsigned char*>(b.data()), k);
        left -= k;
      }
      self.complete(ec, n);
    }
  };

  NextLayer next_;
  FrameScanner scanner_;
};

// The websocket stream's closing handshake tears down the layer below.
template <class NextLayer>
void teardown(boost::beast::role_type role, FrameLengthGuard<NextLayer>& s, boost::beast::error_code& ec) {
  using boost::beast::websocket::teardown;
  teardown(role, s.next_layer(), ec);
}

template <class NextLayer, class TeardownHandler>
void async_teardown(boost::beast::role_type role, FrameLengthGuard<NextLayer>& s, TeardownHandler&& handler) {
  using boost::beast::websocket::async_teardown;
  async_teardown(role, s.next_layer(), std::forward<TeardownHandler>(handler));
}

}  // namespace nexus::server
