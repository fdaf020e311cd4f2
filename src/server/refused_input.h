// RefusedInput: what the messages a realtime session gets an `error` for
// cost it (docs/protocol.md, "Framing"). Pure bookkeeping over byte counts
// and the time given; RealtimeSession (realtime_session.h) asks it before
// each read whether to wait, tells it every read, and tells it when the
// message last read is refused.
//
// Model, with L = the server's body limit in bytes:
//   - debt: the bytes of refused messages, paid back at L bytes a second;
//     while in debt (> 0) every byte read adds to it, so a client that
//     keeps sending pays for all of it. Past kPaceAfter x L of debt the
//     next read waits until the debt is min(kPaceQuantum, L / 4) under that:
//     a refused message or two cost nothing more, a client that keeps
//     sending is read at L bytes a second in ~64 KiB pieces (16 wake-ups a
//     second at the default 1 MiB).
//   - refused: the bytes of refused messages, forgotten kForgetSlower times
//     slower than the debt (L a minute); past kBudget x L the session is to
//     be cut off (input_flood). A long session's occasional refusal never
//     adds up to it; a flood reaches it in a few seconds.
// A message's bytes count once in each, however many reads and refusals it
// took (an oversized message is refused at each read past the limit).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace nexus::server {

class RefusedInput {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kPaceAfter = 2;        // x L: debt past which reading waits
  static constexpr double kPaceQuantum = 64 << 10;  // bytes
  static constexpr uint64_t kBudget = 4;         // x L: refused bytes that cut the session off
  static constexpr double kForgetSlower = 60;    // refused bytes are forgotten at L a minute

  explicit RefusedInput(size_t body_limit) : limit_(static_cast<double>(body_limit)) {}

  // How long to wait before the next read (zero: read now).
  Clock::duration wait_before_read(Clock::time_point now);
  // `n` bytes of the current message were read (the first ones of a new
  // message after end_message()).
  void on_read(size_t n);
  void end_message() { message_done_ = true; }
  // The message read last (or being read) is refused: its bytes not counted
  // yet go into the debt and the refused total. True when the refused total
  // is now over the budget: cut the session off.
  bool refuse(Clock::time_point now);

  double refused() const { return refused_; }
  uint64_t budget() const { return kBudget * static_cast<uint64_t>(limit_); }
  size_t message_bytes() const { return message_bytes_; }

 private:
  void settle(Clock::time_point now);  // pays back for the time since the last call

  double limit_;  // L: bytes, and bytes a second
  double debt_ = 0, refused_ = 0;
  Clock::time_point settled_at_{};
  size_t message_bytes_ = 0;    // read of the current (or last) message
  size_t message_charged_ = 0;  // of those, added to the debt
  size_t message_refused_ = 0;  // of those, added to the refused total
  bool message_done_ = false;
};

}  // namespace nexus::server
