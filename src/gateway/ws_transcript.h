// WsTranscript: what the gateway's WebSocket relay remembers of one session
// so that, when its replica dies, the session can go on on another replica
// (docs/gateway.md, "WebSocket failover"). One implementation per relayed
// protocol:
//   RealtimeTranscript   GET /v1/realtime (realtime_transcript.h): the
//                        conversation is replayed into a new session;
//   ResponsesTranscript  the Responses API's WebSocket mode, GET
//                        /v1/responses (responses_transcript.h): the
//                        connection's last response is kept as input items,
//                        and a response.create continuing it is rewritten
//                        with its whole input once the replica that held it
//                        is gone.
// The relay (proxy_websocket.cpp, proxy_websocket_failover.cpp) feeds it
// every whole text message both ways, in order, and asks it what to tell
// the client and the new replica when a replica dies.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nexus::gateway {

enum class WsProtocol { Realtime, Responses, Count };

// The protocol's name in logs and metrics ("realtime", "responses").
const char* ws_protocol_name(WsProtocol p);

class WsTranscript {
 public:
  // The longest server message the relay reads (a longer one is relayed
  // but not followed: the transcript is lost).
  static constexpr size_t kMaxServerMessage = 4 << 20;

  virtual ~WsTranscript() = default;

  // One whole text message from the client. Returns the message to send in
  // its place when the transcript rewrites it (only after a move, where
  // rewrites_after_move()); nullopt: forward it as it is.
  virtual std::optional<std::string> on_client_event(std::string_view text) = 0;
  // One whole text message from the replica; returns its "type" ("" when it
  // has none, or the transcript is lost).
  virtual std::string on_server_event(std::string_view text) = 0;

  // The relay could not follow one direction's messages (binary, too large,
  // broken framing): the transcript no longer matches the session.
  void mark_lost() { lost_ = true; }
  bool lost() const { return lost_; }
  // The client is closing the session: not to be failed over.
  bool closing() const { return closing_; }
  void set_closing() { closing_ = true; }

  // The replica died. Events (JSON text) for the client, in order: the end
  // of a response that was running, then (`moving`) what tells the client
  // its session goes on elsewhere. `detail` says what happened.
  virtual std::vector<std::string> death_notice(bool moving, const std::string& detail) = 0;
  // An `error` event in the protocol's shape (the gateway's own, when it
  // ends a session); `client_fault`: the client's message caused it (a 4xx
  // where the protocol carries a status), else the replicas failed (5xx).
  virtual std::string error_event(const std::string& code, const std::string& message, bool client_fault) const = 0;
  // The client events that bring a new session on another replica to
  // where the dead one was (the unanswered requests among them), in
  // order; the transcript expects their answers from the new replica next.
  virtual std::vector<std::string> replay() = 0;
  // Events of the new replica that acknowledge the replay before it reads
  // the replay's requests (realtime's session.created and session.updated).
  virtual bool acknowledges_replay(std::string_view type) const = 0;
  // After a move, every client message is re-encoded whole (so that
  // on_client_event may rewrite it) rather than relayed as its bytes come.
  virtual bool rewrites_after_move() const = 0;

 protected:
  bool lost_ = false;
  bool closing_ = false;
};

}  // namespace nexus::gateway
