#include "server/ws_frames.h"

#include <algorithm>

namespace nexus::server {

namespace {

bool is_control(WsOpcode op) { return static_cast<uint8_t>(op) >= 8; }

bool known_opcode(uint8_t op) { return op <= 2 || (op >= 8 && op <= 10); }

// Header length once its first two bytes are known.
size_t header_size(uint8_t b1) {
  const uint8_t len7 = b1 & 0x7f;
  return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + ((b1 & 0x80) ? 4 : 0);
}

}  // namespace

bool WsFrameReader::parse_header() {
  const auto* h = reinterpret_cast<const uint8_t*>(header_.data());
  const uint8_t b0 = h[0], b1 = h[1];
  if (b0 & 0x70) return false;  // RSV bits: an extension we do not follow
  if (!known_opcode(b0 & 0x0f)) return false;
  fin_ = (b0 & 0x80) != 0;
  frame_op_ = static_cast<WsOpcode>(b0 & 0x0f);
  masked_ = (b1 & 0x80) != 0;
  size_t at = 2;
  uint64_t len = b1 & 0x7f;
  if (len == 126) {
    len = (uint64_t{h[2]} << 8) | h[3];
    at = 4;
  } else if (len == 127) {
    len = 0;
    for (int i = 0; i < 8; ++i) len = (len << 8) | h[2 + i];
    at = 10;
    if (len >> 63) return false;  // RFC 6455 5.2: the most significant bit must be 0
  }
  if (masked_) std::copy_n(h + at, 4, mask_);
  if (is_control(frame_op_)) {
    if (!fin_ || len > 125) return false;  // 5.5: control frames are whole and short
  } else if (frame_op_ == WsOpcode::Continuation) {
    if (!in_fragmented_) return false;
  } else if (in_fragmented_) {
    return false;  // a new data message inside a fragmented one
  }
  remaining_ = len;
  frame_pos_ = 0;
  header_.clear();
  in_frame_ = true;
  if (is_control(frame_op_)) {
    control_ = WsMessage{frame_op_, {}, false};
  } else if (frame_op_ != WsOpcode::Continuation) {
    data_ = WsMessage{frame_op_, {}, false};
    data_size_ = 0;
  }
  return true;
}

void WsFrameReader::end_frame(const OnMessage& on_message, size_t end) {
  in_frame_ = false;
  if (is_control(frame_op_)) return on_message(control_, end);
  in_fragmented_ = !fin_;
  if (fin_) on_message(data_, end);
}

bool WsFrameReader::feed(std::string_view bytes, const OnMessage& on_message) {
  const size_t total = bytes.size();
  while (!failed_ && !bytes.empty()) {
    if (!in_frame_) {
      // Header: two bytes, then as many as they announce.
      const size_t want = header_.size() < 2 ? 2 : header_size(static_cast<uint8_t>(header_[1]));
      const size_t take = std::min(want - header_.size(), bytes.size());
      header_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (header_.size() < 2) continue;
      if (header_.size() < header_size(static_cast<uint8_t>(header_[1]))) continue;
      if (!parse_header()) {
        failed_ = true;
        break;
      }
      if (remaining_ == 0) end_frame(on_message, total - bytes.size());
      continue;
    }
    const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size()));
    WsMessage& m = is_control(frame_op_) ? control_ : data_;
    if (!is_control(frame_op_)) {  // (control frames are <= 125 bytes)
      data_size_ += take;
      if (data_size_ > max_message_) {
        m.too_large = true;
        m.payload.clear();
        m.payload.shrink_to_fit();
      }
    }
    if (!m.too_large) {
      const size_t at = m.payload.size();
      m.payload.append(bytes.substr(0, take));
      if (masked_)
        for (size_t i = 0; i < take; ++i) m.payload[at + i] ^= static_cast<char>(mask_[(frame_pos_ + i) & 3]);
    }
    frame_pos_ += take;
    remaining_ -= take;
    bytes.remove_prefix(take);
    if (remaining_ == 0) end_frame(on_message, total - bytes.size());
  }
  return !failed_;
}

std::string encode_ws_close(uint16_t code, std::string_view reason) {
  std::string payload{static_cast<char>(code >> 8), static_cast<char>(code & 0xff)};
  payload += reason;
  return encode_ws_frame(WsOpcode::Close, payload);
}

std::string encode_ws_frame(WsOpcode opcode, std::string_view payload, std::optional<uint32_t> mask) {
  std::string f;
  f.reserve(payload.size() + 14);
  f.push_back(static_cast<char>(0x80 | static_cast<uint8_t>(opcode)));
  const uint8_t mbit = mask ? 0x80 : 0;
  const uint64_t n = payload.size();
  if (n < 126) {
    f.push_back(static_cast<char>(mbit | n));
  } else if (n <= 0xffff) {
    f.push_back(static_cast<char>(mbit | 126));
    f.push_back(static_cast<char>(n >> 8));
    f.push_back(static_cast<char>(n & 0xff));
  } else {
    f.push_back(static_cast<char>(mbit | 127));
    for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  }
  if (!mask) return f.append(payload);
  uint8_t key[4];
  for (int i = 0; i < 4; ++i) key[i] = static_cast<uint8_t>(*mask >> (8 * (3 - i)));
  f.append(reinterpret_cast<const char*>(key), 4);
  const size_t at = f.size();
  f.append(payload);
  for (size_t i = 0; i < payload.size(); ++i) f[at + i] ^= static_cast<char>(key[i & 3]);
  return f;
}

}  // namespace nexus::server
