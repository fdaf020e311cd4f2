// ResponsesTranscript: what the gateway remembers of one connection of the
// Responses API's WebSocket mode (GET /v1/responses; the server's side is
// server/responses/responses_ws_session.h) so that, when its replica dies,
// the connection goes on on another replica (docs/gateway.md, "WebSocket
// failover").
//
// Such a connection has little state on the replica: its last response,
// which the next `response.create` may continue by `previous_response_id`
// with only its new input items. The transcript follows the messages both
// ways and keeps that response as the whole input it continued from, as
// Responses input items: each request's `input` (a string becomes one user
// message) after the history of the response it continued, then the output
// items of its `response.completed` / `.incomplete` (an output message
// without text is left out, as the server leaves it out of its own
// transcript). A request's `instructions` and `tools` are its own: they are
// not part of the history (OpenAI's semantics, and the server's).
//
// Each `response.create` gets exactly one answer from the server, in order:
// `response.created`, or an `error` event naming it (`"event":
// "response.create"`). Requests not answered yet are kept as sent.
//
// When the replica dies:
//   - a response that was running ends for the client with a
//     `response.failed` (code `replica_failed`, the next sequence_number);
//     the client retries the turn as after any failed response;
//   - the connection moves to another replica at once, silently (the mode
//     has no session event), and the unanswered requests are replayed;
//   - a `response.create` (replayed or sent later) whose
//     `previous_response_id` names the dead replica's last response is
//     rewritten with that response's whole history before its own input,
//     and no `previous_response_id`: the new replica prefills it all once
//     and keeps it from then on. The answer equals what a fresh connection
//     sent the same history gives (greedy).
// A continuation the transcript cannot rewrite (of a response it did not
// see whole, such as one stored by an earlier HTTP request, or history
// past `max_bytes`) is sent as it is; the new replica answers
// previous_response_not_found, after which Codex CLI resends the whole
// input. Where the pairing of requests and answers is lost (an oversized or
// binary message, refused by the replica without naming a request), the
// transcript is marked lost and the connection is not moved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/ws_transcript.h"

namespace nexus::gateway {

class ResponsesTranscript final : public WsTranscript {
 public:
  // Bytes of history kept (the input items of the last response and of
  // the requests not answered yet); past it the history is dropped, not
  // the connection.
  static constexpr size_t kLimit = 16 << 20;

  explicit ResponsesTranscript(size_t max_bytes = kLimit) : max_bytes_(max_bytes) {}

  std::optional<std::string> on_client_event(std::string_view text) override;
  std::string on_server_event(std::string_view text) override;
  std::vector<std::string> death_notice(bool moving, const std::string& detail) override;
  // {"type": "error", "status": 502, "error": {"type": "server_error", "code", "message", "param": null}};
  // a client's fault: status 400, type invalid_request_error.
  std::string error_event(const std::string& code, const std::string& message, bool client_fault) const override;
  // The unanswered requests, rewritten where they continue the dead
  // replica's last response. That response's history is kept for later
  // continuations of it.
  std::vector<std::string> replay() override;
  bool acknowledges_replay(std::string_view) const override { return false; }
  bool rewrites_after_move() const override { return true; }

  // The last response the connection holds ("" when none).
  const std::string& last_response() const { return last_.id; }
  size_t pending_requests() const { return pending_.size(); }

 private:
  // A response's whole input (its history and its own input items, then its
  // output once it ended), or nullopt where the transcript does not know it.
  struct Known {
    std::string id;
    std::optional<nlohmann::ordered_json> history;
  };
  struct Request {
    std::string event;                             // as sent (or rewritten)
    std::optional<nlohmann::ordered_json> input;   // the whole input it is over
  };

  // The whole input of a request continuing `previous` with `input`.
  std::optional<nlohmann::ordered_json> whole_input(const std::string& previous, const nlohmann::ordered_json& input) const;
  // `event` without previous_response_id and with `input` as its input.
  static std::string rewritten(nlohmann::ordered_json event, const nlohmann::ordered_json& input);
  void bound(std::optional<nlohmann::ordered_json>& history) const;

  size_t max_bytes_;
  std::deque<Request> pending_;     // sent, not answered yet
  std::optional<Request> running_;  // between response.created and its end
  std::string running_id_;
  // The running response as response.created gave it (model, created_at,
  // the request's echoed fields): a death notice fails that object.
  nlohmann::ordered_json running_response_;
  Known last_;   // the replica's last response (kept: completed or incomplete)
  Known moved_;  // the last response of the replica that died: continued by rewriting
  int64_t sequence_ = -1;  // the last sequence_number the replica sent
};

}  // namespace nexus::gateway
