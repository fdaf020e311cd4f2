#include "server/ws_frame_guard.h"

namespace nexus::server {

void FrameScanner::after_length() {
  if (masked_) {
    mask_left_ = 4;
    state_ = State::MaskKey;
  } else {
    state_ = payload_left_ > 0 ? State::Payload : State::Opcode;
  }
}

void FrameScanner::scan(unsigned char* data, size_t n) {
  size_t i = 0;
  while (i < n && state_ != State::Done) {
    switch (state_) {
      case State::Opcode:
        ++i;
        state_ = State::Length;
        break;
      case State::Length: {
        const unsigned char b = data[i++];
        masked_ = (b & 0x80) != 0;
        const unsigned len7 = b & 0x7f;
        payload_left_ = 0;
        if (len7 >= 126) {
          ext_size_ = ext_left_ = len7 == 126 ? 2 : 8;
          state_ = State::ExtLength;
        } else {
          payload_left_ = len7;
          after_length();
        }
        break;
      }
      case State::ExtLength: {
        if (ext_size_ == 8 && ext_left_ == 8 && (data[i] & 0x80)) zeroing_ = true;
        if (zeroing_) data[i] = 0;
        payload_left_ = (payload_left_ << 8) | data[i];
        ++i;
        if (--ext_left_ == 0) {
          if (zeroing_) state_ = State::Done;
          else after_length();
        }
        break;
      }
      case State::MaskKey:
        ++i;
        if (--mask_left_ == 0) state_ = payload_left_ > 0 ? State::Payload : State::Opcode;
        break;
      case State::Payload: {
        const uint64_t k = std::min<uint64_t>(payload_left_, n - i);
        i += static_cast<size_t>(k);
        payload_left_ -= k;
        if (payload_left_ == 0) state_ = State::Opcode;
        break;
      }
      case State::Done:
        break;
    }
  }
}

}  // namespace nexus::server
