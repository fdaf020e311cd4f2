#include "server/refused_input.h"

#include <algorithm>

namespace nexus::server {

void RefusedInput::settle(Clock::time_point now) {
  const double paid = std::chrono::duration<double>(now - settled_at_).count() * limit_;
  debt_ = std::max(0.0, debt_ - paid);
  refused_ = std::max(0.0, refused_ - paid / kForgetSlower);
  settled_at_ = now;
}

RefusedInput::Clock::duration RefusedInput::wait_before_read(Clock::time_point now) {
  if (debt_ <= 0) return Clock::duration::zero();
  settle(now);
  const double pace_after = kPaceAfter * limit_;
  if (debt_ <= pace_after) return Clock::duration::zero();
  const double target = std::max(0.0, pace_after - std::min(kPaceQuantum, limit_ / 4));
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((debt_ - target) / limit_));
}

void RefusedInput::on_read(size_t n) {
  if (message_done_) message_bytes_ = message_charged_ = message_refused_ = 0;
  message_done_ = false;
  message_bytes_ += n;
  if (debt_ > 0) {
    debt_ += static_cast<double>(n);
    message_charged_ += n;
  }
}

bool RefusedInput::refuse(Clock::time_point now) {
  settle(now);
  debt_ += static_cast<double>(message_bytes_ - message_charged_);
  refused_ += static_cast<double>(message_bytes_ - message_refused_);
  message_charged_ = message_refused_ = message_bytes_;
  return refused_ > static_cast<double>(budget());
}

}  // namespace nexus::server
