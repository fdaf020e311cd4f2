#include "gateway/circuit_breaker.h"

namespace nexus::gateway {

const char* breaker_state_name(BreakerState s) {
  switch (s) {
    case BreakerState::Closed: return "closed";
    case BreakerState::Open: return "open";
    case BreakerState::HalfOpen: return "half_open";
  }
  return "?";
}

CircuitBreaker::CircuitBreaker(BreakerOptions opts, std::function<void(BreakerState, BreakerState)> on_transition)
    : opts_(opts), on_transition_(std::move(on_transition)) {}

void CircuitBreaker::move_to(BreakerState s, Clock::time_point now) {
  if (s == state_) return;
  const BreakerState from = state_;
  state_ = s;
  failures_.clear();
  probes_in_flight_ = 0;
  half_open_successes_ = 0;
  if (s == BreakerState::Open) opened_at_ = now;
  if (on_transition_) on_transition_(from, s);
}

void CircuitBreaker::refresh(Clock::time_point now) {
  if (state_ == BreakerState::Open && now - opened_at_ >= opts_.cool_down) move_to(BreakerState::HalfOpen, now);
}

Admission CircuitBreaker::try_acquire(Clock::time_point now) {
  std::lock_guard lock(mu_);
  refresh(now);
  switch (state_) {
    case BreakerState::Closed: return Admission::Admitted;
    case BreakerState::Open: return Admission::Denied;
    case BreakerState::HalfOpen:
      if (probes_in_flight_ >= opts_.half_open_probes) return Admission::Denied;
      ++probes_in_flight_;
      return Admission::Probe;
  }
  return Admission::Denied;
}

bool CircuitBreaker::would_admit(Clock::time_point now) {
  std::lock_guard lock(mu_);
  refresh(now);
  return state_ == BreakerState::Closed ||
         (state_ == BreakerState::HalfOpen && probes_in_flight_ < opts_.half_open_probes);
}

void CircuitBreaker::record_success(Clock::time_point now, bool probe) {
  std::lock_guard lock(mu_);
  refresh(now);
  if (state_ != BreakerState::HalfOpen) return;
  if (probe && probes_in_flight_ > 0) --probes_in_flight_;
  if (++half_open_successes_ >= opts_.successes_to_close) move_to(BreakerState::Closed, now);
}

void CircuitBreaker::record_failure(Clock::time_point now, bool probe) {
  std::lock_guard lock(mu_);
  refresh(now);
  switch (state_) {
    case BreakerState::Closed:
      failures_.push_back(now);
      while (!failures_.empty() && now - failures_.front() > opts_.window) failures_.pop_front();
      if (static_cast<int>(failures_.size()) >= opts_.failure_threshold) move_to(BreakerState::Open, now);
      break;
    case BreakerState::HalfOpen: move_to(BreakerState::Open, now); break;
    case BreakerState::Open: break;
  }
}

BreakerState CircuitBreaker::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

}  // namespace nexus::gateway
