// WsTransport: a conversation per WebSocket connection (Boost.Beast): the
// Nexus realtime session protocol (GET /v1/realtime, docs/protocol.md), or,
// for Api::Responses, the Responses API's WebSocket mode (GET
// /v1/responses, docs/agents.md; described at the end).
//
// One WebSocket connection is one server-side session, i.e. one
// conversation whose KV stays in the engine between turns. A bench session
// (RequestSpec::session, `turns` requests) maps to one connection:
//   turn 0          connect + handshake (counted in the request: start is
//                   stamped before connecting, connect_ms covers TCP connect
//                   and the upgrade), then `session.update` with the
//                   session-wide settings (model, ignore_eos, the extra body);
//   every turn      `input.append` with only the input the server does not
//                   hold yet (chat: the new messages, one event each;
//                   completions: the new raw text), then `response.create`
//                   with {"max_tokens": N};
//   last turn       after response.done, the closing handshake (not counted
//                   in the request), so no history leaks into the next
//                   bench session.
// The events of a turn are written back to back without waiting for
// answers (the server handles them in order).
//
// Per request: one token_times entry for each `response.delta` whose text is
// non-empty (stamped when its message has been read); usage
// (prompt/completion/cached tokens) and the server's ttft_ms from
// `response.done`. Errors: an `error` event or a response.done with
// finish_reason "error"/"cancelled" is ErrorKind::Server (the connection is
// then dropped, the session's state being unknown); a declined upgrade is
// ErrorKind::HttpStatus with the server's status; a message that is not a
// JSON object with a "type", or a binary message, is ErrorKind::Protocol.
// A successful upgrade sets http_status = 101.
// Chat messages must have a string "content" and a role the protocol takes
// as input (user, system, tool); others fail the request (Protocol).
//
// The Responses WebSocket mode: each turn is one `response.create`
// (api_wire.h's input items, max_output_tokens, store: false, model,
// ignore_eos, the extra body): turn 0 with the whole input, later turns with
// only the new messages and `previous_response_id` naming the last
// response. With RequestSpec::warm_up, turn 0 is preceded by a `generate:
// false` create of the leading system messages (its time is not the
// turn's: start is stamped again after it) and continues it. Text chunks
// are response.output_text.delta events; usage comes from
// response.completed / .incomplete, which end the turn; response.failed and
// `error` events are ErrorKind::Server.
#pragma once

#include <memory>

#include "loadgen/http_transport.h"
#include "loadgen/transport.h"

namespace nexus::loadgen {

// "/v1/realtime" / "/v1/responses" after the URL's base path.
std::string realtime_target(const ServerUrl& server);
std::string responses_ws_target(const ServerUrl& server);

class WsTransport final : public Transport {
 public:
  // Uses opts.server, timeout (per request, connect included), api_key (sent
  // as a bearer token in the upgrade request) and extra_body (merged into
  // the session.update settings); keep_alive is ignored.
  explicit WsTransport(HttpTransportOptions opts);
  ~WsTransport() override;

  RequestResult run_request(const RequestSpec& req) override;
  uint64_t connections_opened() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

TransportFactory ws_transport_factory(HttpTransportOptions opts);

}  // namespace nexus::loadgen
