// ProxySession's containment of queries of death (proxy_session.h,
// query_of_death.h; docs/gateway.md "Query of death").
//
// The policy, and why:
//   - A death is an attempt whose replica connection ended (reset, EOF, a
//     failed write) after the request was sent and before any byte reached
//     the client; a connect error is not one (nothing was sent), nor a
//     timeout (the replica lives), nor a 5xx (it answered). The request may
//     have killed the replica, unless the replica's health probes were
//     failing before the request was sent, or it held a half-open probe
//     slot (its breaker had opened): then the death says nothing of the
//     request and is retried as any failure is.
//   - After a death the request goes to one more replica at most: a replica
//     killed by `kill -9` or the OOM killer loses nothing (its requests
//     finish elsewhere), and a query of death kills two replicas, not the
//     fleet. Its second death answers 502 `query_of_death`, and its
//     fingerprint (method, path and body) is refused with that 502 for
//     `refuse_for` without reaching any replica. A request that comes back
//     after one death and dies on another replica within the suspect window
//     is one too (a client retrying what the gateway did not).
//   - A stream cut after its first byte is not retried (the client has its
//     bytes), but its death counts the same way: a client that resends a
//     stream that kills its replica kills one more, not every one.
//   - Realtime: the messages the replica got since its last message are in
//     flight. When it dies, they are suspects, and the session moves with
//     them in the replay; if the new replica dies before it has answered
//     anything past that replay, the session ends (`query_of_death`) instead
//     of moving a third time, and its suspects are refused as they are for
//     HTTP: a new session that sends one is ended before the replica gets
//     it.
// The cost: a request in flight on the same two replicas when they died
// (a retry of the first death that went where the query of death went) is
// answered the same 502, and its body refused as well: the gateway cannot
// tell the two apart.
#include <fmt/format.h>

#include "gateway/proxy_http.h"
#include "gateway/proxy_session.h"

namespace nexus::gateway {

namespace {

constexpr std::string_view kRealtimeKind = "realtime";
constexpr size_t kMaxInFlightMessages = 16;

int64_t seconds(std::chrono::milliseconds d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

}  // namespace

uint64_t ProxySession::request_fingerprint() {
  if (!fingerprint_) {
    const std::string kind = fmt::format("{} {}", std::string(req_.method_string()), std::string(req_.target()));
    fingerprint_ = QueryOfDeath::fingerprint(kind, req_.body());
  }
  return *fingerprint_;
}

bool ProxySession::refuse_query_of_death() {
  const auto now = Clock::now();
  if (!ctx_.qod.refusing(now) || !ctx_.qod.refused(request_fingerprint(), now)) return false;
  ctx_.metrics.query_of_death(false).inc();
  release_tenant();
  respond(502, api_error_body(502,
                              fmt::format("This request was in flight on two replicas that both failed; the gateway "
                                          "does not send it to a replica again for up to {} s.",
                                          seconds(ctx_.opts.query_of_death.refuse_for)),
                              "query_of_death"));
  return true;
}

bool ProxySession::request_died() {
  if (replica_->failing_before(sent_at_) || probe_) return false;  // not the request's doing
  ++deaths_;
  const QueryOfDeath::Death d = ctx_.qod.record_death(request_fingerprint(), replica_->index, Clock::now());
  if (d == QueryOfDeath::Death::Detected) {
    ctx_.metrics.query_of_death(true).inc();
    if (ctx_.opts.log) ctx_.opts.log(fmt::format("query of death: {} {} killed two replicas (last {}); refused from now on",
                                                 std::string(req_.method_string()), logfmt_value(std::string(req_.target())),
                                                 replica_->id));
  }
  return d != QueryOfDeath::Death::Suspect || deaths_ >= 2;
}

void ProxySession::replica_died(const std::string& detail) {
  const bool last = request_died();
  attempt_failed(RetryReason::Reset, detail, !last);  // give_up() answers a known query of death as one
}

void ProxySession::answer_query_of_death() {
  finish(Outcome::UpstreamError);
  respond(502, api_error_body(502,
                              fmt::format("This request was in flight on two replicas that both failed (last: {}); "
                                          "the gateway sends it to no other replica, and refuses it for up to {} s.",
                                          last_error_, seconds(ctx_.opts.query_of_death.refuse_for)),
                              "query_of_death"));
}

bool ProxySession::admit_client_message(std::string_view payload) {
  const uint64_t fp = QueryOfDeath::fingerprint(kRealtimeKind, payload);
  const auto now = Clock::now();
  if (ctx_.qod.refused(fp, now)) return false;
  if (in_flight_messages_.size() == kMaxInFlightMessages) in_flight_messages_.erase(in_flight_messages_.begin());
  in_flight_messages_.push_back(fp);
  last_forward_at_ = now;
  return true;
}

void ProxySession::refuse_client_message() {
  if (refusal_ == ClientRefusal::QueryOfDeath) ctx_.metrics.query_of_death(false).inc();
  if (failing_over_) return;  // failover_connected() ends the session
  // The replica's read then fails into upstream_lost(), which ends the
  // session: the client's writer is free there (no relay write in flight).
  boost::system::error_code ignored;
  if (up_) up_->close(ignored);
}

bool ProxySession::session_killed_two_replicas() {
  std::vector<uint64_t> suspects = std::move(in_flight_messages_);
  in_flight_messages_.clear();
  const bool twice = replay_unanswered_;
  if (twice) suspects.insert(suspects.end(), replayed_messages_.begin(), replayed_messages_.end());
  replay_unanswered_ = false;
  replayed_messages_.clear();
  if (replica_->failing_before(last_forward_at_)) {  // not the messages' doing: they move on, still suspects
    replayed_messages_ = std::move(suspects);
    return false;
  }
  bool refused = false;
  const auto now = Clock::now();
  for (const uint64_t fp : suspects) refused |= ctx_.qod.record_death(fp, replica_->index, now) != QueryOfDeath::Death::Suspect;
  if (twice || refused) {
    ctx_.metrics.query_of_death(true).inc();
    return true;
  }
  replayed_messages_ = std::move(suspects);
  return false;
}

}  // namespace nexus::gateway
