// WebSocket framing (RFC 6455 section 5) for what Beast's stream does not
// do: a reader that observes a relayed byte stream frame by frame (the
// gateway's realtime relay), and the encoder of frames written outside
// Beast (the gateway's own events to a client and its replay to a new
// replica; the close frame of a realtime session the server cuts off,
// realtime_session.h). The relay still forwards the bytes as they
// arrive; the reader only watches them, so observing costs no latency.
//
// Frames with RSV bits set (a negotiated extension such as
// permessage-deflate, which the gateway strips from the upgrade request) or
// a reserved opcode make the reader fail: the stream can no longer be
// followed, and the caller stops relying on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace nexus::server {

enum class WsOpcode : uint8_t { Continuation = 0, Text = 1, Binary = 2, Close = 8, Ping = 9, Pong = 10 };

// One complete message: a data message reassembled from its fragments, or a
// control frame. `payload` is unmasked; it is empty when `too_large` (the
// message passed the reader's limit and was not kept).
struct WsMessage {
  WsOpcode opcode = WsOpcode::Text;
  std::string payload;
  bool too_large = false;
};

class WsFrameReader {
 public:
  // `max_message`: the most payload bytes kept per message.
  explicit WsFrameReader(size_t max_message) : max_message_(max_message) {}

  // Feeds the next bytes of the stream; calls `on_message` for each message
  // completed by them, in order, with the offset in `bytes` just past the
  // message's last byte. Returns false once the stream broke the framing
  // rules (then and after: nothing more is parsed).
  using OnMessage = std::function<void(WsMessage&, size_t end)>;
  bool feed(std::string_view bytes, const OnMessage& on_message);

  bool failed() const { return failed_; }
  // True between messages: no frame header, payload or fragmented message
  // is partly read.
  bool at_message_boundary() const { return header_.empty() && !in_frame_ && !in_fragmented_; }

 private:
  bool parse_header();  // from header_; false on a protocol violation
  void end_frame(const OnMessage& on_message, size_t end);

  size_t max_message_;
  bool failed_ = false;
  std::string header_;  // bytes of a frame header read so far
  bool in_frame_ = false;  // header parsed, payload being read
  bool fin_ = false;
  WsOpcode frame_op_ = WsOpcode::Text;
  bool masked_ = false;
  uint8_t mask_[4] = {};
  uint64_t remaining_ = 0;  // payload bytes of this frame still to read
  uint64_t frame_pos_ = 0;  // payload bytes of this frame read (for the mask phase)
  bool in_fragmented_ = false;  // a data message continues in later frames
  WsMessage data_;     // the data message being assembled
  uint64_t data_size_ = 0;
  WsMessage control_;  // the control frame being read
};

// A whole frame (FIN set) holding `payload` as one message. With `mask`
// (client to server frames must be masked, RFC 6455 5.3) the payload is
// masked with it; without, the frame is a server's (unmasked).
std::string encode_ws_frame(WsOpcode opcode, std::string_view payload, std::optional<uint32_t> mask = std::nullopt);
// A server's close frame: `code` in network byte order, then `reason` (RFC
// 6455 section 5.5.1; a reason of at most 123 bytes keeps it a control frame).
std::string encode_ws_close(uint16_t code, std::string_view reason);

}  // namespace nexus::server
