// RealtimeTranscript: what the gateway remembers of one realtime session so
// that, when its replica dies, a new session on another replica can be
// given the conversation so far (docs/gateway.md, "WebSocket failover"; the
// interface is ws_transcript.h's).
//
// It follows the session's JSON events (docs/protocol.md) both ways and
// keeps:
//   settings      the last `session.updated`'s session object (the server's
//                 effective settings, `system` included), without its id;
//   conversation  every input item the client appended (chat message or raw
//                 text, as parsed by the server's own parser), with each
//                 response's generated text inserted as an `assistant`
//                 message (or raw text, after raw text) where the server's
//                 conversation has it: right after the input that response
//                 was created over;
//   unanswered    `session.update`s and `response.create`/`.redirect`s the
//                 replica has not answered yet (each gets exactly one answer,
//                 in order: an `...updated`/`...created` or an `error`
//                 naming the event), so a turn started just as the replica
//                 died is started again.
// replay() turns that into client events for a new session: one
// `session.update` with the settings, the unanswered updates, then the items
// as `input.append`s with the unanswered creates at their places. The new
// session holds the same messages a fresh session given them would; the
// next response equals that fresh session's (greedy), not necessarily the
// dead session's (its KV held the generated token ids, the replay holds
// their text).
//
// Where the gateway cannot know what the replica kept, the transcript is
// marked lost and the session is not failed over: an input refused for its
// size (`input_too_large`, `message_too_large`: which of several queued
// appends was refused is not said), `slow_consumer` (the replica dropped
// deltas), a message longer than `max_message` or a transcript past
// `max_bytes`, events that are not JSON text, framing the reader cannot
// follow.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/ws_transcript.h"

namespace nexus::gateway {

class RealtimeTranscript final : public WsTranscript {
 public:
  // The gateway's limit (bytes of conversation kept per session; also the
  // longest server event it reads).
  static constexpr size_t kLimit = 4 << 20;

  explicit RealtimeTranscript(size_t max_bytes = kLimit) : max_bytes_(max_bytes) {}

  // One whole text message each way (the frame layer's messages). JSON is
  // read under the process's nesting limit (util/json_depth.h). A client's
  // `session.close` marks the session closing. Never rewrites a message.
  std::optional<std::string> on_client_event(std::string_view text) override;
  std::string on_server_event(std::string_view text) override;

  // The running response's id (between `response.created` and
  // `response.done`), for the `response.done` the gateway writes in its place.
  const std::optional<std::string>& running_response() const { return running_; }

  // A `response.done` (finish_reason `error`) for a running response, then,
  // when moving, an `error` event `replica_failed`.
  std::vector<std::string> death_notice(bool moving, const std::string& detail) override;
  std::string error_event(const std::string& code, const std::string& message, bool client_fault) const override;
  // The replica died: a running response ends with the text it had
  // generated (kept in the conversation, as the server keeps an interrupted
  // response's tokens). Returns the client events for the new session, in
  // order, and expects their answers from it next.
  std::vector<std::string> replay() override;
  bool acknowledges_replay(std::string_view type) const override {
    return type == "session.created" || type == "session.updated";
  }
  bool rewrites_after_move() const override { return false; }

  size_t items() const { return items_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Item {
    nlohmann::json input;  // {"message": {...}} or {"text": "..."}
    size_t bytes = 0;
  };
  struct PendingCreate {
    std::string event;  // the client's event as sent (JSON)
    size_t position;    // items_.size() when it was sent: the input it covers
  };

  // Inserts at `at` (before items_[at]); false when that passed max_bytes (lost).
  bool insert_item(nlohmann::json input, size_t at);
  void end_response();
  void answered_create(bool created);

  size_t max_bytes_;
  nlohmann::json settings_ = nlohmann::json::object();
  std::deque<std::optional<std::string>> updates_;  // unanswered; nullopt: the replay's own update
  std::deque<PendingCreate> creates_;                // unanswered
  std::vector<Item> items_;
  size_t bytes_ = 0;
  size_t committed_ = 0;  // items_ before this are in the replica's conversation
  std::optional<std::string> running_;
  size_t response_at_ = 0;  // where the running response's text goes
  std::string response_text_;
};

}  // namespace nexus::gateway
