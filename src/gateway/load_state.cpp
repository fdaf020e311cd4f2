#include "gateway/load_state.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/json_depth.h"

namespace nexus::gateway {

std::optional<ReplicaLoad> parse_load(std::string_view body) {
  const nlohmann::json j = parse_json_bounded_or_discarded(body);
  if (!j.is_object()) return std::nullopt;
  ReplicaLoad l;
  try {
    l.running = j.at("running").get<int32_t>();
    l.waiting = j.at("waiting").get<int32_t>();
    l.kv_used_blocks = j.value("kv_used_blocks", 0);
    l.kv_total_blocks = j.value("kv_total_blocks", 0);
    l.kv_utilization = std::clamp(j.value("kv_utilization", 0.0), 0.0, 1.0);
    l.draining = j.value("draining", false);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return l;
}

void LoadState::on_poll(const ReplicaLoad& l) {
  std::lock_guard lock(mu_);
  reported_ = l;
  in_flight_at_poll_ = in_flight_;
}

void LoadState::on_poll_failed() {
  std::lock_guard lock(mu_);
  reported_.reset();
}

void LoadState::begin_request() {
  std::lock_guard lock(mu_);
  ++in_flight_;
}

void LoadState::end_request() {
  std::lock_guard lock(mu_);
  --in_flight_;
}

double LoadState::score() const {
  std::lock_guard lock(mu_);
  if (!reported_) return in_flight_;
  const int32_t queue =
      std::max(in_flight_, reported_->running + reported_->waiting + (in_flight_ - in_flight_at_poll_));
  return queue + kKvWeight * reported_->kv_utilization;
}

int32_t LoadState::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

std::optional<ReplicaLoad> LoadState::reported() const {
  std::lock_guard lock(mu_);
  return reported_;
}

}  // namespace nexus::gateway
